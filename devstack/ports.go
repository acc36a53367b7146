package devstack

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"

	"go.temporal.io/server/common/config"
)

// hostSet says where to reach what listens on the configured IP.
type hostSet struct {
	dial     string // host clients dial to reach the frontend and the UI
	internal string // host the other services bind and advertise in membership
}

func resolveHosts(ipStr string) (hostSet, error) {
	ip := net.ParseIP(ipStr)
	if ip == nil {
		return hostSet{}, fmt.Errorf("devstack: invalid IP %q", ipStr)
	}
	switch {
	case ip.IsUnspecified():
		return hostSet{dial: defaultIP, internal: defaultIP}, nil
	case ip.IsLoopback():
		return hostSet{dial: ipStr, internal: defaultIP}, nil
	default:
		// Membership advertises one broadcast address for all services, so on a
		// specific interface every service must listen there.
		return hostSet{dial: ipStr, internal: ipStr}, nil
	}
}

// reservation holds listeners that keep ports busy until release.
type reservation struct {
	listeners []net.Listener
	// below, if set, bounds the free ports picked: a Postgres store keeps
	// the services' ports in a SMALLINT column (cluster_membership), so
	// they must stay under 32768, where the kernel's ephemeral range,
	// from which it picks free ports, starts above.
	below int
}

// take reserves port on ip, or a free port when port is 0.
func (r *reservation) take(ip string, port int) (int, error) {
	if port == 0 && r.below > 0 {
		return r.takeBelow(ip)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		if port != 0 {
			return 0, fmt.Errorf("port %d on %s is not free: %w", port, ip, err)
		}
		return 0, fmt.Errorf("pick a free port on %s: %w", ip, err)
	}
	r.listeners = append(r.listeners, l)
	return l.Addr().(*net.TCPAddr).Port, nil
}

// takeBelow reserves a free port in [10000, below).
func (r *reservation) takeBelow(ip string) (int, error) {
	for range 200 {
		port := 10000 + rand.IntN(r.below-10000)
		if l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port))); err == nil {
			r.listeners = append(r.listeners, l)
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port on %s below %d", ip, r.below)
}

func (r *reservation) release() {
	for _, l := range r.listeners {
		_ = l.Close()
	}
	r.listeners = nil
}

// serviceConfigs gives every service its own free gRPC and membership ports
// (never the usual 7234/7235/6933…), so that servers do not collide.
func serviceConfigs(ports *reservation, frontendIP, internalIP string, frontendPort int, names []string) (map[string]config.Service, error) {
	services := make(map[string]config.Service, len(names))
	for _, name := range names {
		bindIP, grpcPort := internalIP, 0
		var err error
		if name == "frontend" && frontendPort != 0 {
			bindIP, grpcPort = frontendIP, frontendPort
		} else if grpcPort, err = ports.take(bindIP, 0); err != nil {
			return nil, fmt.Errorf("devstack: %s gRPC port: %w", name, err)
		}
		membershipPort, err := ports.take(bindIP, 0)
		if err != nil {
			return nil, fmt.Errorf("devstack: %s membership port: %w", name, err)
		}
		services[name] = config.Service{RPC: config.RPC{
			GRPCPort:       grpcPort,
			MembershipPort: membershipPort,
			BindOnIP:       bindIP,
		}}
	}
	return services, nil
}
