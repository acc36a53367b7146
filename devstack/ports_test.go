package devstack

import "testing"

// Every port the server picks for itself lies below the kernel's
// ephemeral range, where no outgoing connection takes it between its
// reservation and the server's bind.
func TestServerPortsArePickedBelowTheEphemeralRange(t *testing.T) {
	ports := newServerPorts()
	defer ports.release()
	services, err := serviceConfigs(ports, "127.0.0.1", "127.0.0.1", 0, []string{"frontend", "history", "matching", "worker"})
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range services {
		for _, p := range []int{s.RPC.GRPCPort, s.RPC.MembershipPort} {
			if p < 10000 || p >= 1<<15 {
				t.Errorf("%s: port %d, want one in [10000, 32768)", name, p)
			}
		}
	}
}
