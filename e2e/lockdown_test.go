package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/internal/testenv"
)

// compose is the part of docker-compose.yml the lockdown checks read.
type compose struct {
	Services map[string]struct {
		Image       string         `yaml:"image"`
		Build       any            `yaml:"build"`
		Command     any            `yaml:"command"`
		Environment map[string]any `yaml:"environment"`
		Ports       []string       `yaml:"ports"`
		Networks    map[string]struct {
			IPv4 string `yaml:"ipv4_address"`
		} `yaml:"networks"`
	} `yaml:"services"`
	Networks map[string]struct {
		IPAM struct {
			Config []struct {
				Subnet  string `yaml:"subnet"`
				IPRange string `yaml:"ip_range"`
			} `yaml:"config"`
		} `yaml:"ipam"`
	} `yaml:"networks"`
}

// The shipped stack has no open door (README "Locked down"): only the edge
// publishes ports, the operators' tools only on OPS_BIND (loopback by
// default) and behind the edge's basic auth, every Temporal process
// requires the API key and every seckill process sends it, and the api
// believes X-Forwarded-For from the edge's address alone, which nginx
// writes itself.
func TestComposeExposesOnlyTheEdge(t *testing.T) {
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile("../deploy/nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	guarded := guardedPorts(t, string(conf))

	edge, ok := c.Services["edge"]
	if !ok {
		t.Fatal("docker-compose.yml has no edge service")
	}
	for name, s := range c.Services {
		if name != "edge" && len(s.Ports) > 0 {
			t.Errorf("service %s publishes %v: only the edge may publish ports", name, s.Ports)
		}
	}
	published := regexp.MustCompile(`^(\$\{OPS_BIND:-127\.0\.0\.1\}:)?(\d+):(\d+)$`)
	for _, p := range edge.Ports {
		m := published.FindStringSubmatch(p)
		public := m != nil && m[1] == "" && m[2] == "8080" && m[3] == "8080" // the api, to everyone
		operators := m != nil && m[1] != "" && m[2] == m[3] && guarded[m[3]] // a tool, signed in, on OPS_BIND
		if !public && !operators {
			t.Errorf("the edge publishes %q: only 8080 (the api) may be public; an operator's port must be bound to ${OPS_BIND:-127.0.0.1} and have auth_basic in deploy/nginx.conf (guarded: %v)", p, guarded)
		}
	}

	for name, s := range c.Services {
		seckill := s.Image == "seckill:latest" || s.Build != nil
		if !seckill {
			continue
		}
		cmd := fmt.Sprint(s.Command)
		if strings.HasPrefix(strings.Trim(cmd, "[]"), "temporal") {
			if !strings.Contains(fmt.Sprint(s.Environment["SECKILL_TEMPORAL_SERVER_API_KEY"]), "TEMPORAL_API_KEY:?") {
				t.Errorf("Temporal service %s does not require the API key (SECKILL_TEMPORAL_SERVER_API_KEY from TEMPORAL_API_KEY)", name)
			}
			continue
		}
		if !strings.Contains(fmt.Sprint(s.Environment["TEMPORAL_API_KEY"]), "TEMPORAL_API_KEY:?") {
			t.Errorf("seckill service %s (%s) does not send TEMPORAL_API_KEY", name, cmd)
		}
	}

	// The api trusts the edge alone, and the edge's address cannot be
	// handed to another container first.
	trusted := fmt.Sprint(c.Services["api"].Environment["SECKILL_TRUSTED_PROXIES"])
	edgeIP := edge.Networks["default"].IPv4
	if edgeIP == "" || trusted != edgeIP+"/32" {
		t.Errorf("api trusts X-Forwarded-For from %q; want exactly the edge's fixed address %q/32", trusted, edgeIP)
	}
	if cfg := c.Networks["default"].IPAM.Config; len(cfg) != 1 {
		t.Errorf("the default network has %d ipam configs, want one with the edge's subnet", len(cfg))
	} else if ip, err := netip.ParseAddr(edgeIP); err == nil {
		subnet, err1 := netip.ParsePrefix(cfg[0].Subnet)
		dynamic, err2 := netip.ParsePrefix(cfg[0].IPRange)
		if err1 != nil || err2 != nil || !subnet.Contains(ip) || dynamic.Contains(ip) {
			t.Errorf("edge address %s must be in subnet %q and outside the dynamic ip_range %q", ip, cfg[0].Subnet, cfg[0].IPRange)
		}
	}

	// nginx writes the client's address itself.
	if strings.Contains(string(conf), "$proxy_add_x_forwarded_for") {
		t.Error("deploy/nginx.conf appends to the client's X-Forwarded-For; it must set it from $remote_addr")
	}
	if !strings.Contains(string(conf), "proxy_set_header X-Forwarded-For $remote_addr;") {
		t.Error("deploy/nginx.conf does not set X-Forwarded-For from $remote_addr")
	}
}

// guardedPorts are the ports of deploy/nginx.conf's server blocks that
// require basic auth and strip the Authorization header before passing a
// request on.
func guardedPorts(t *testing.T, conf string) map[string]bool {
	t.Helper()
	guarded := map[string]bool{}
	blocks := regexp.MustCompile(`(?m)^server \{`).Split(conf, -1)
	listen := regexp.MustCompile(`(?m)^\s*listen (\d+);`)
	for _, b := range blocks[1:] {
		m := listen.FindStringSubmatch(b)
		if m == nil {
			t.Fatalf("a server block of deploy/nginx.conf has no plain `listen PORT;`:\n%s", b)
		}
		if strings.Contains(b, "auth_basic_user_file /etc/nginx/ops.htpasswd;") && strings.Contains(b, `proxy_set_header Authorization "";`) {
			guarded[m[1]] = true
		}
	}
	return guarded
}

// deploy/nginx.conf in a real nginx, in front of a real api and a Temporal
// server that requires its API key, as docker-compose.yml runs them:
//   - a forged X-Forwarded-For changes no per-address limit;
//   - the Temporal Web UI answers nobody without the operators' sign-in,
//     and for those who signed in it works (it presents the server's key),
//     its write actions included, while a state-changing request without
//     the UI's CSRF header is refused, whatever Authorization it carries;
//   - a UI that listens beyond loopback without --ui-actions=on is read-only.
func TestEdgeGuardsTheToolsAndWritesTheClientAddress(t *testing.T) {
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		if os.Getenv("SECKILL_REQUIRE_SERVICES") == "1" {
			t.Fatal("nginx is required (.ci/run installs it): ", err)
		}
		t.Skip("nginx not installed; run the tests through .ci/run")
	}
	const key = "lockdown-temporal-key"
	uiPort := testenv.FreePort(t)
	tp := testenv.NewTemporal(t)
	// compose's shape: listening beyond loopback, write actions on because
	// the edge signs people in.
	tp.Args = []string{"--api-key", key, "--ip", "0.0.0.0", "--ui-port", fmt.Sprint(uiPort), "--ui-actions", "on"}
	tp.Start()
	st := newStackWith(t, testenv.StackOptions{Temporal: tp, Env: []string{
		"TEMPORAL_API_KEY=" + key, "TEMPORAL_TLS=off",
		"SECKILL_IP_RATE=5", "SECKILL_TRUSTED_PROXIES=127.0.0.1/32",
	}})
	run(t, "serve", st.env, "serve")
	waitReady(t, st.api+"/readyz", 60*time.Second)

	// The UI of a server left on auto beyond loopback: read-only.
	roPort := testenv.FreePort(t)
	ro := testenv.NewTemporal(t)
	ro.Args = []string{"--ip", "0.0.0.0", "--ui-port", fmt.Sprint(roPort)}
	ro.Start()

	edge := startEdge(t, nginx, map[string]string{
		"http://api:8080":      st.api,
		"http://temporal:8233": fmt.Sprintf("http://127.0.0.1:%d", uiPort),
	})

	t.Run("forged X-Forwarded-For", func(t *testing.T) {
		signer, err := newSigner()
		if err != nil {
			t.Fatal(err)
		}
		admin, _ := signer.Mint("lockdown-admin", auth.RoleAdmin, time.Hour)
		sale := openSale(t, st.api, admin, 100)
		limited := 0
		for i := range 12 {
			buyer, _ := signer.Mint(fmt.Sprintf("lockdown-buyer-%d", i), auth.RoleBuyer, time.Hour)
			req, _ := http.NewRequest("POST", edge.api+"/v1/sales/"+sale+"/orders", nil)
			req.Header.Set("Authorization", "Bearer "+buyer)
			req.Header.Set("X-Forwarded-For", fmt.Sprintf("10.9.8.%d", i+1)) // a new address each time
			status, body := do(t, req)
			switch status {
			case http.StatusAccepted:
			case http.StatusTooManyRequests:
				limited++
			default:
				t.Fatalf("purchase %d through the edge: %d %s", i, status, body)
			}
		}
		// 12 purchases from one address at 5/s: the limit bites, whatever
		// the buyers claimed to be.
		if limited == 0 {
			t.Fatal("12 purchases with a different forged X-Forwarded-For each got no 429: the per-address limit believed the client's header")
		}
	})

	workflows := edge.ops["8233"] + "/api/v1/namespaces/default/workflows"
	t.Run("sign-in", func(t *testing.T) {
		for _, c := range []struct {
			name, user, password string
			want                 int
		}{
			{"anonymous", "", "", http.StatusUnauthorized},
			{"wrong password", "ops", "guess", http.StatusUnauthorized},
			// Signed in: the UI presents the server's key (the frontend
			// refuses the UI's calls without it).
			{"operator", "ops", edge.password, http.StatusOK},
		} {
			req, _ := http.NewRequest("GET", workflows, nil)
			if c.user != "" {
				req.SetBasicAuth(c.user, c.password)
			}
			if status, body := do(t, req); status != c.want {
				t.Errorf("%s: GET %s = %d, want %d: %s", c.name, workflows, status, c.want, body)
			}
		}
		for port, url := range edge.ops {
			if port == "8233" {
				continue
			}
			req, _ := http.NewRequest("GET", url+"/", nil)
			if status, _ := do(t, req); status != http.StatusUnauthorized {
				t.Errorf("operator port %s answers %d without a sign-in, want 401", port, status)
			}
		}
	})

	t.Run("write actions", func(t *testing.T) {
		terminate := edge.ops["8233"] + "/api/v1/namespaces/default/workflows/order-1/terminate"
		// The CSRF cookie the UI's page gets on its first load.
		csrf := uiCSRFCookie(t, edge.ops["8233"], "ops", edge.password)
		post := func(headers map[string]string) (int, string) {
			req, _ := http.NewRequest("POST", terminate, strings.NewReader(`{"reason":"lockdown test"}`))
			req.SetBasicAuth("ops", edge.password)
			req.AddCookie(&http.Cookie{Name: "_csrf", Value: csrf})
			for k, v := range headers {
				req.Header.Set(k, v)
			}
			return do(t, req)
		}
		// What a foreign page's form could send: no CSRF header, not JSON.
		if status, body := post(map[string]string{"Content-Type": "text/plain"}); status != http.StatusForbidden {
			t.Errorf("a cross-site-shaped POST to the UI: %d, want 403: %s", status, body)
		}
		// The reported hole: any Authorization header used to skip the UI's
		// CSRF check. The edge drops it, so the check applies.
		if status, body := post(map[string]string{"Content-Type": "application/json", "Authorization-Extras": "x"}); status < 400 || status == http.StatusNotFound {
			t.Errorf("a POST without the CSRF token: %d, want refused: %s", status, body)
		}
		// The UI's own request reaches Temporal (which knows no such
		// workflow): operators keep their actions.
		status, body := post(map[string]string{"Content-Type": "application/json", "X-CSRF-Token": csrf})
		if status != http.StatusNotFound || !strings.Contains(body, "not found") {
			t.Errorf("the UI's own terminate: %d %s, want Temporal's 404 for a workflow it does not have", status, body)
		}
	})

	t.Run("read-only beyond loopback", func(t *testing.T) {
		base := fmt.Sprintf("http://127.0.0.1:%d", roPort)
		var settings struct{ DisableWriteActions bool }
		resp, err := http.Get(base + "/api/v1/settings")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&settings); err != nil {
			t.Fatal(err)
		}
		if !settings.DisableWriteActions {
			t.Error("a UI listening on 0.0.0.0 with --ui-actions=auto offers write actions")
		}
		csrf := uiCSRFCookie(t, base, "", "")
		req, _ := http.NewRequest("POST", base+"/api/v1/namespaces/default/workflows/order-1/terminate", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-CSRF-Token", csrf)
		req.AddCookie(&http.Cookie{Name: "_csrf", Value: csrf})
		if status, body := do(t, req); status != http.StatusMethodNotAllowed {
			t.Errorf("terminate through a read-only UI: %d, want 405: %s", status, body)
		}
	})

}

// edgeProc is a running nginx with deploy/nginx.conf.
type edgeProc struct {
	api      string            // the api's port
	ops      map[string]string // the operators' ports by their port in the file
	password string            // OPS_PASSWORD of user "ops"
}

// startEdge runs deploy/nginx.conf in nginx on free loopback ports, with
// the upstreams it names replaced by upstream's addresses (the others
// point at a closed port) and the password file compose writes.
func startEdge(t *testing.T, nginx string, upstream map[string]string) edgeProc {
	t.Helper()
	conf, err := os.ReadFile("../deploy/nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := edgeProc{ops: map[string]string{}, password: "lockdown-ops-password"}
	site := string(conf)
	for from, to := range upstream {
		site = strings.ReplaceAll(site, from, to)
	}
	closed := fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t))
	site = regexp.MustCompile(`http://[a-z-]+:\d+`).ReplaceAllString(site, closed)
	site = regexp.MustCompile(`(?m)^\s*listen (\d+);`).ReplaceAllStringFunc(site, func(l string) string {
		port := strings.TrimSuffix(strings.Fields(l)[1], ";")
		free := testenv.FreePort(t)
		url := fmt.Sprintf("http://127.0.0.1:%d", free)
		if port == "8080" {
			e.api = url
		} else {
			e.ops[port] = url
		}
		return fmt.Sprintf("  listen 127.0.0.1:%d;", free)
	})
	site = strings.ReplaceAll(site, "/etc/nginx/ops.htpasswd", filepath.Join(dir, "ops.htpasswd"))
	// What the compose file's command writes.
	if err := os.WriteFile(filepath.Join(dir, "ops.htpasswd"), []byte("ops:{PLAIN}"+e.password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// One process, no master: a test's kill ends all of it.
	main := fmt.Sprintf(`user root;
master_process off;
daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events {}
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
%[2]s
}
`, dir, site)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(main), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(nginx, "-t", "-c", filepath.Join(dir, "nginx.conf"), "-p", dir).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	cmd := exec.Command(nginx, "-c", filepath.Join(dir, "nginx.conf"), "-p", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Any answer from the edge (the api's 401 or the edge's) means it listens.
	testenv.Eventually(t, 10*time.Second, func() error {
		resp, err := http.Get(e.api + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	return e
}

// uiCSRFCookie loads the UI's page and returns the CSRF cookie it sets.
func uiCSRFCookie(t *testing.T, base, user, password string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/", nil)
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == "_csrf" {
			return c.Value
		}
	}
	t.Fatalf("GET %s/: %d, no _csrf cookie", base, resp.StatusCode)
	return ""
}

// do sends req and returns the status and body.
func do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// `seckill dev` mints tokens for anyone (POST /v1/dev/token), admins
// included: it listens on loopback unless told otherwise, and told to
// listen beyond it, it says so and mints no more.
func TestDevMintsTokensOnlyOnLoopback(t *testing.T) {
	help, err := exec.Command(testenv.Binary(t), "dev", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("seckill dev --help: %v\n%s", err, help)
	}
	if !strings.Contains(string(help), `--http-addr="127.0.0.1:8080"`) {
		t.Errorf("seckill dev does not default to loopback:\n%s", help)
	}
	testenv.RedisAddr(t)
	port := testenv.FreePort(t)
	dev := run(t, "dev", []string{"SECKILL_JWT_SECRET=" + secret}, "dev", "--memory", "--seed-stock=0",
		"--http-addr", fmt.Sprintf("0.0.0.0:%d", port), "--temporal-port=0", "--ui-port=0")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitReady(t, base+"/readyz", 60*time.Second)
	req, _ := http.NewRequest("POST", base+"/v1/dev/token", strings.NewReader(`{"user_id":"mallory","role":"admin"}`))
	req.Header.Set("Content-Type", "application/json")
	// Not routed: 405, since the demo page's "GET /" matches the path.
	if status, body := do(t, req); status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
		t.Errorf("POST /v1/dev/token on a dev instance listening on 0.0.0.0: %d, want no such operation: %s", status, body)
	}
	if !strings.Contains(dev.Output(), "listens beyond loopback") {
		t.Errorf("no warning that dev listens beyond loopback:\n%s", dev.Output())
	}
}
