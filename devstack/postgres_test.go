package devstack

import (
	"strings"
	"testing"

	"go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
)

// The store's driver picks the server's SQL plugin: pgx unless told lib/pq,
// and a driver it does not know is refused by name.
func TestPostgresDriverPicksThePlugin(t *testing.T) {
	for driver, want := range map[string]string{"": postgresql.PluginNamePGX, DriverPGX: postgresql.PluginNamePGX, DriverPQ: postgresql.PluginName} {
		cfg, err := postgresSQL("postgres://u:p@db:5433/temporal?sslmode=disable", driver)
		if err != nil || cfg.PluginName != want || cfg.ConnectAddr != "db:5433" || cfg.ConnectAttributes["sslmode"] != "disable" {
			t.Errorf("driver %q: %+v, %v; want plugin %s", driver, cfg, err, want)
		}
	}
	if _, err := postgresSQL("postgres://u:p@db/temporal", "mysql"); err == nil || !strings.Contains(err.Error(), `"mysql"`) {
		t.Errorf("driver mysql: %v, want refused", err)
	}
}
