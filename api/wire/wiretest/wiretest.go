// Package wiretest holds what the tests of the wire format share: the seed
// corpus of the create-sale fuzz targets.
package wiretest

import (
	_ "embed"
	"encoding/json"
	"testing"
)

//go:embed create-sale-seeds.json
var createSaleSeeds []byte

// AddCreateSaleSeeds adds the create-sale seed corpus to a fuzz target.
func AddCreateSaleSeeds(f *testing.F) {
	f.Helper()
	var seeds []string
	if err := json.Unmarshal(createSaleSeeds, &seeds); err != nil {
		f.Fatalf("seed corpus: %v", err)
	}
	for _, seed := range seeds {
		f.Add([]byte(seed))
	}
}
