package devstack

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"

	"go.temporal.io/server/common/config"
)

// hostSet says where to reach what listens on the configured IP.
type hostSet struct {
	dial      string // host clients dial to reach the frontend and the UI
	internal  string // IP the other services bind
	broadcast string // IP the services advertise in membership
}

// resolveHosts places the services. On every interface (0.0.0.0) without a
// broadcast address, the services other than the frontend stay on
// loopback: one host. With one (a container of a cluster of several), they
// bind every interface and advertise it, as membership needs an IP the
// other processes can reach.
func resolveHosts(ipStr, broadcast string) (hostSet, error) {
	ip := net.ParseIP(ipStr)
	if ip == nil {
		return hostSet{}, fmt.Errorf("devstack: invalid IP %q", ipStr)
	}
	switch {
	case ip.IsUnspecified() && broadcast != "":
		b, err := broadcastIP(broadcast)
		if err != nil {
			return hostSet{}, err
		}
		return hostSet{dial: b, internal: ipStr, broadcast: b}, nil
	case broadcast != "":
		return hostSet{}, fmt.Errorf("devstack: a broadcast address is for services on every interface (IP 0.0.0.0), not %s", ipStr)
	case ip.IsUnspecified():
		return hostSet{dial: defaultIP, internal: defaultIP, broadcast: defaultIP}, nil
	case ip.IsLoopback():
		return hostSet{dial: ipStr, internal: defaultIP, broadcast: defaultIP}, nil
	default:
		// Membership advertises one broadcast address for all services, so on a
		// specific interface every service must listen there.
		return hostSet{dial: ipStr, internal: ipStr, broadcast: ipStr}, nil
	}
}

// broadcastIP is s, an IP, or for "auto" this host's first IPv4 address
// that is not loopback (a container's own).
func broadcastIP(s string) (string, error) {
	if s != "auto" {
		if ip := net.ParseIP(s); ip == nil || ip.IsUnspecified() {
			return "", fmt.Errorf("devstack: broadcast address %q: want an IP the other processes reach, or auto", s)
		}
		return s, nil
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("devstack: broadcast address auto: %w", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String(), nil
		}
	}
	return "", errors.New("devstack: broadcast address auto: this host has no IPv4 address but loopback")
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

// newServerPorts is the reservation of the server's ports. They are
// picked below the kernel's ephemeral range whatever the store: a
// Postgres store keeps them in a SMALLINT column, and a port the kernel
// picked, once its listener is released for the server to bind, can be
// handed to any outgoing connection first (a CI run lost a membership
// port so: "bind: address already in use" on 34703).
func newServerPorts() *reservation { return &reservation{below: 1 << 15} }

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
