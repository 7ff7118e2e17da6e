package berth_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	berth "github.com/berth-engine/berth/clients/go"
	"github.com/berth-engine/berth/clients/go/internal/testenv"
	"github.com/berth-engine/berth/clients/go/registry"
)

// newClient connects to the test berthd with its own empty config dir.
func newClient(t *testing.T, env testenv.Env, opts ...berth.Opt) *berth.Client {
	t.Helper()
	all := append([]berth.Opt{berth.WithHost(env.DockerHost), berth.WithAPIVersionNegotiation(), berth.WithConfigDir(t.TempDir())}, opts...)
	c, err := berth.NewClientWithOpts(all...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestSystemFromEnvPingVersion(t *testing.T) {
	env := testenv.Load(t)
	t.Setenv("DOCKER_HOST", env.DockerHost)
	t.Setenv("DOCKER_API_VERSION", "")
	t.Setenv("DOCKER_CERT_PATH", "")
	c, err := berth.NewClientWithOpts(berth.FromEnv, berth.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	p, err := c.Ping(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p.OSType != "linux" || !strings.HasPrefix(p.APIVersion, "1.") {
		t.Errorf("ping: %+v", p)
	}
	v, err := c.ServerVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v.APIVersion != p.APIVersion || v.Os != "linux" {
		t.Errorf("version: %+v", v)
	}
	if want := minVersion(p.APIVersion, berth.DefaultVersion); c.ClientVersion() != want {
		t.Errorf("negotiated %s, want %s", c.ClientVersion(), want)
	}
}

func minVersion(a, b string) string {
	var a1, a2, b1, b2 int
	splitVersion(a, &a1, &a2)
	splitVersion(b, &b1, &b2)
	if a1 < b1 || (a1 == b1 && a2 < b2) {
		return a
	}
	return b
}

func splitVersion(v string, major, minor *int) {
	fmt.Sscanf(v, "%d.%d", major, minor)
}

func TestSystemPinnedVersionTooNew(t *testing.T) {
	env := testenv.Load(t)
	t.Setenv("DOCKER_HOST", env.DockerHost)
	t.Setenv("DOCKER_API_VERSION", "1.99")
	t.Setenv("DOCKER_CERT_PATH", "")
	c, err := berth.NewClientWithOpts(berth.FromEnv, berth.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.ServerVersion(context.Background())
	if !berth.IsErrBadRequest(err) || !strings.Contains(err.Error(), "client version 1.99 is too new") {
		t.Fatalf("err = %v", err)
	}
	var apiErr *berth.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("not an *berth.Error with status 400: %#v", err)
	}
}

func TestSystemLogin(t *testing.T) {
	env := testenv.Load(t)
	c := newClient(t, env)
	ctx := context.Background()
	for _, reg := range []testenv.Registry{env.Registries.Basic, env.Registries.Token} {
		ok, err := c.RegistryLogin(ctx, registry.AuthConfig{Username: reg.Username, Password: reg.Password, ServerAddress: reg.Host})
		if err != nil || ok.Status != "Login Succeeded" {
			t.Fatalf("%s: %+v %v", reg.Host, ok, err)
		}
		_, err = c.RegistryLogin(ctx, registry.AuthConfig{Username: reg.Username, Password: "wrong-password", ServerAddress: reg.Host})
		if !berth.IsErrUnauthorized(err) {
			t.Fatalf("%s wrong password: %v", reg.Host, err)
		}
	}

	dir := t.TempDir()
	c = newClient(t, env, berth.WithConfigDir(dir))
	reg := env.Registries.Basic
	auth := registry.AuthConfig{Username: reg.Username, Password: reg.Password, ServerAddress: reg.Host}
	if _, err := c.RegistryLogin(ctx, auth); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); !os.IsNotExist(err) {
		t.Fatalf("login stored something: %v", err)
	}
	if err := c.StoreCredentials(ctx, auth); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	var cfg struct {
		Auths map[string]struct{ Auth string } `json:"auths"`
	}
	_ = json.Unmarshal(data, &cfg)
	raw, _ := base64.StdEncoding.DecodeString(cfg.Auths[reg.Host].Auth)
	if string(raw) != reg.Username+":"+reg.Password {
		t.Fatalf("stored: %s", data)
	}
}
