package stripe

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	stripego "github.com/stripe/stripe-go/v83"

	"github.com/seckill/seckill/internal/testenv"
)

// The stripe-mock these tests run against is testenv.StripeMockURL's:
// STRIPE_MOCK_URL's (CI starts one), or one the test process builds and
// starts, pinned to testenv.StripeMockVersion.

// The stripe-mock the tests build bundles the OpenAPI spec of the
// library's API version: a request the library builds is validated against
// the API it was generated from.
func TestStripeMockBundlesTheLibrarysAPIVersion(t *testing.T) {
	mod := testenv.StripeMockModule + "@" + testenv.StripeMockVersion
	out, err := exec.Command("go", "mod", "download", "-json", mod).Output()
	if err != nil {
		if os.Getenv("SECKILL_REQUIRE_SERVICES") == "1" {
			t.Fatalf("go mod download %s: %v", mod, err)
		}
		t.Skipf("go mod download %s: %v", mod, err)
	}
	var dl struct{ Dir string }
	if err := json.Unmarshal(out, &dl); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dl.Dir, "embedded", "openapi", "spec3.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var spec struct {
		Info struct {
			Version string `json:"version"`
		} `json:"info"`
	}
	if err := json.NewDecoder(f).Decode(&spec); err != nil {
		t.Fatal(err)
	}
	if spec.Info.Version != stripego.APIVersion {
		t.Fatalf("stripe-mock %s bundles API version %q; stripe-go speaks %q: pin (testenv.StripeMockVersion) the stripe-mock release built from the library's OpenAPI version",
			testenv.StripeMockVersion, spec.Info.Version, stripego.APIVersion)
	}
}
