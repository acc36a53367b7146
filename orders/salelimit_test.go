package orders

import "testing"

func TestSaleLimitsAreOneBucketPerSale(t *testing.T) {
	l := newSaleLimits(3)
	for i := range 3 {
		if !l.allow(1) {
			t.Fatalf("request %d of a 3/s budget refused", i+1)
		}
	}
	if l.allow(1) {
		t.Fatal("the 4th request within the second was allowed")
	}
	if !l.allow(2) {
		t.Fatal("another sale's budget was spent by sale 1")
	}
	if d := l.retryAfter(); d <= 0 {
		t.Fatalf("retry after %s", d)
	}
	if !newSaleLimits(0).allow(1) || !newSaleLimits(-1).allow(1) {
		t.Fatal("0 or a negative rate must mean no limit")
	}
}

func TestSaleLimitsStayBounded(t *testing.T) {
	l := newSaleLimits(1)
	for sale := range int64(3 * maxSaleLimits) {
		l.allow(sale)
	}
	if n := len(l.buckets); n > maxSaleLimits {
		t.Fatalf("%d buckets kept, bound %d", n, maxSaleLimits)
	}
}
