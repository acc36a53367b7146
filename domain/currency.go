package domain

import (
	"fmt"
	"strings"

	"golang.org/x/text/currency"
)

// DefaultCurrency is the currency of a sale made without one where no
// deployment default is given (the store's callers in tests; the commands
// default --default-currency to it).
const DefaultCurrency = "USD"

// ParseCurrency checks that code is an ISO 4217 currency code that
// golang.org/x/text knows (its table follows the standard's list), in any
// case, and returns it upper case. Prices are in the currency's minor
// units: what a unit of price_cents is depends on it (a cent, a fen; yen
// have none).
func ParseCurrency(code string) (string, error) {
	u, err := currency.ParseISO(code)
	if err != nil || len(code) != 3 {
		return "", fmt.Errorf("%q is not an ISO 4217 currency code", code)
	}
	return strings.ToUpper(u.String()), nil
}
