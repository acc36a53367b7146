package domain

import (
	"encoding/json"
	"strings"
	"testing"
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
