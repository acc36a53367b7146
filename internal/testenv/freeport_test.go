package testenv

import (
	"fmt"
	"net"
	"testing"
)

// Ports handed out are distinct while held, below the ephemeral range, and
// free to bind.
func TestFreePortsAreDistinctAndBindable(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		p := FreePort(t)
		if seen[p] || p < 20000 || p >= 32768 {
			t.Fatalf("port %d: repeated or outside 20000..32767", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
	}
}
