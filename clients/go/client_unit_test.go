package berth

import (
	"os"
	"path/filepath"
	"testing"
)

func TestUnitParseHost(t *testing.T) {
	cases := []struct{ in, proto, addr string }{
		{"unix:///run/berth/berth.sock", "unix", "/run/berth/berth.sock"},
		{"/tmp/x.sock", "unix", "/tmp/x.sock"},
		{"tcp://127.0.0.1:2375", "tcp", "127.0.0.1:2375"},
		{"tcp://[::1]:4000", "tcp", "[::1]:4000"},
	}
	for _, c := range cases {
		proto, addr, err := parseHost(c.in)
		if err != nil || proto != c.proto || addr != c.addr {
			t.Errorf("%s: %s %s %v", c.in, proto, addr, err)
		}
	}
	for _, bad := range []string{"ssh://host", "unix://relative", "nonsense"} {
		if _, _, err := parseHost(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestUnitDefaultsAndFromEnv(t *testing.T) {
	for _, k := range []string{"DOCKER_HOST", "DOCKER_API_VERSION", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	c, err := NewClientWithOpts(FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.DaemonHost() != DefaultDockerHost || c.ClientVersion() != DefaultVersion || c.negotiate {
		t.Errorf("defaults: %s %s %v", c.DaemonHost(), c.ClientVersion(), c.negotiate)
	}

	t.Setenv("DOCKER_HOST", "tcp://example.test")
	t.Setenv("DOCKER_API_VERSION", "1.41")
	c, err = NewClientWithOpts(FromEnv, WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	if c.addr != "example.test:2375" || c.ClientVersion() != "1.41" || !c.manualOverride {
		t.Errorf("env: %s %s %v", c.addr, c.ClientVersion(), c.manualOverride)
	}
	c.NegotiateAPIVersionPing(Ping{APIVersion: "1.30"})
	if c.ClientVersion() != "1.41" {
		t.Errorf("a pinned version must not be negotiated away: %s", c.ClientVersion())
	}

	t.Setenv("DOCKER_CERT_PATH", filepath.Join(t.TempDir(), "missing"))
	if _, err := NewClientWithOpts(FromEnv); err == nil {
		t.Error("missing certificates must be an error")
	}
}

func TestUnitNegotiation(t *testing.T) {
	c, _ := NewClientWithOpts(WithAPIVersionNegotiation())
	c.NegotiateAPIVersionPing(Ping{APIVersion: "1.44"})
	if c.ClientVersion() != "1.44" {
		t.Errorf("older daemon: %s", c.ClientVersion())
	}
	c, _ = NewClientWithOpts(WithAPIVersionNegotiation())
	c.NegotiateAPIVersionPing(Ping{APIVersion: "1.99"})
	if c.ClientVersion() != DefaultVersion {
		t.Errorf("newer daemon: %s", c.ClientVersion())
	}
	c, _ = NewClientWithOpts(WithAPIVersionNegotiation())
	c.NegotiateAPIVersionPing(Ping{})
	if c.ClientVersion() != "1.24" {
		t.Errorf("no header: %s", c.ClientVersion())
	}
}
