package domain

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Ids that need more than 53 bits survive the trip through JSON as
// strings, and payloads written by earlier versions (numbers) still read.
func TestOrderRefIDsAreJSONStrings(t *testing.T) {
	ref := OrderRef{OrderID: 250357341151563777, SaleID: 9007199254740993, UserID: "u", AmountCents: 1999}
	b, err := json.Marshal(ref)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"order_id":"250357341151563777"`) || !strings.Contains(string(b), `"sale_id":"9007199254740993"`) {
		t.Fatalf("encoded %s, want string ids", b)
	}
	var back OrderRef
	if err := json.Unmarshal(b, &back); err != nil || back != ref {
		t.Fatalf("decoded %+v, %v; want %+v", back, err, ref)
	}
	var old OrderRef
	if err := json.Unmarshal([]byte(`{"order_id":1001,"sale_id":7,"user_id":"u","amount_cents":5}`), &old); err != nil ||
		old != (OrderRef{OrderID: 1001, SaleID: 7, UserID: "u", AmountCents: 5}) {
		t.Fatalf("decoded a numeric payload as %+v, %v", old, err)
	}
	if err := json.Unmarshal([]byte(`{"order_id":"x"}`), &old); err == nil {
		t.Fatal("a non-numeric id decoded")
	}
}

// The admission time travels with the order to its saga's steps, and a
// payload without it (a workflow started before it was carried) reads as
// zero, which the steps replace by the id's time.
func TestOrderRefCarriesTheAdmissionTime(t *testing.T) {
	ref := OrderRef{OrderID: 1, SaleID: 2, UserID: "u", AdmittedAt: time.UnixMilli(1767225600123).UTC()}
	b, err := json.Marshal(ref)
	if err != nil {
		t.Fatal(err)
	}
	var back OrderRef
	if err := json.Unmarshal(b, &back); err != nil || !back.AdmittedAt.Equal(ref.AdmittedAt) {
		t.Fatalf("decoded %s as %+v, %v", b, back, err)
	}
	if b, _ := json.Marshal(OrderRef{OrderID: 1}); strings.Contains(string(b), "admitted_at") {
		t.Fatalf("a zero admission time is written: %s", b)
	}
}
