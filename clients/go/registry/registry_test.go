package registry

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEncodeDecodeAuthConfig(t *testing.T) {
	enc, err := EncodeAuthConfig(AuthConfig{Username: "u", Password: ">>>???", ServerAddress: "r:5000"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(enc, "+/") {
		t.Fatalf("not base64url: %s", enc)
	}
	raw, _ := base64.URLEncoding.DecodeString(enc)
	var fields map[string]string
	if err := json.Unmarshal(raw, &fields); err != nil || len(fields) != 3 || fields["password"] != ">>>???" || fields["serveraddress"] != "r:5000" {
		t.Fatalf("json = %s (empty fields must be left out)", raw)
	}
	back, err := DecodeAuthConfig(strings.TrimRight(enc, "="))
	if err != nil || back.Password != ">>>???" {
		t.Fatalf("decode: %+v %v", back, err)
	}
}

func TestReferences(t *testing.T) {
	cases := []struct{ ref, repo, tag, host string }{
		{"busybox", "busybox", "", DockerHub},
		{"library/busybox:1.36", "library/busybox", "1.36", DockerHub},
		{"127.0.0.1:5000/a/b:v", "127.0.0.1:5000/a/b", "v", "127.0.0.1:5000"},
		{"localhost/x@sha256:ab", "localhost/x", "sha256:ab", "localhost"},
		{"index.docker.io/library/x", "index.docker.io/library/x", "", DockerHub},
	}
	for _, c := range cases {
		repo, tag := SplitReference(c.ref)
		if repo != c.repo || tag != c.tag || HostOf(repo) != c.host {
			t.Errorf("%s: got %s %s %s", c.ref, repo, tag, HostOf(repo))
		}
	}
	if HostOfServerAddress("https://index.docker.io/v1/") != DockerHub || HostOfServerAddress("r:5000") != "r:5000" {
		t.Error("HostOfServerAddress")
	}
}

// installHelper writes a real docker-credential-<name> program answering from a fixed table.
func installHelper(t *testing.T, name string, creds map[string][2]string) {
	t.Helper()
	bin := t.TempDir()
	var script strings.Builder
	script.WriteString("#!/bin/sh\nif [ \"$1\" = store ]; then cat > \"$0.stored\"; exit 0; fi\nread url\ncase \"$url\" in\n")
	for url, c := range creds {
		script.WriteString(url + `) printf '{"ServerURL":"%s","Username":"` + c[0] + `","Secret":"` + c[1] + `"}' "$url";;` + "\n")
	}
	script.WriteString("*) echo 'credentials not found in native keychain'; exit 1;;\nesac\n")
	if err := os.WriteFile(filepath.Join(bin, "docker-credential-"+name), []byte(script.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
}

func writeConfig(t *testing.T, v any) string {
	t.Helper()
	dir := t.TempDir()
	data, _ := json.Marshal(v)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestResolveAuthConfig(t *testing.T) {
	installHelper(t, "berthtest", map[string][2]string{
		"helped.example:5000":         {"helper-user", "helper-pass"},
		"https://index.docker.io/v1/": {"<token>", "refresh-token"},
	})
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	dir := writeConfig(t, map[string]any{
		"auths": map[string]any{
			"plain.example:5000":          map[string]string{"auth": b64("alice:s3cret:with:colons")},
			"https://schemed.example/v1/": map[string]string{"auth": b64("bob:pw")},
		},
		"credHelpers": map[string]string{"helped.example:5000": "berthtest", "docker.io": "berthtest"},
	})
	ctx := context.Background()
	check := func(host, user, pass, token string, wantFound bool) {
		t.Helper()
		a, found, err := ResolveAuthConfig(ctx, dir, host)
		if err != nil || found != wantFound || a.Username != user || a.Password != pass || a.IdentityToken != token {
			t.Errorf("%s: %+v found=%v err=%v", host, a, found, err)
		}
	}
	check("plain.example:5000", "alice", "s3cret:with:colons", "", true)
	check("schemed.example", "bob", "pw", "", true)
	check("helped.example:5000", "helper-user", "helper-pass", "", true)
	check(DockerHub, "", "", "refresh-token", true)
	check("unknown.example", "", "", "", false)
}

func TestStoreAuthConfig(t *testing.T) {
	dir := writeConfig(t, map[string]any{"detachKeys": "ctrl-x"})
	ctx := context.Background()
	if err := StoreAuthConfig(ctx, dir, DockerHub, AuthConfig{Username: "dave", Password: "pw"}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	var cfg map[string]any
	_ = json.Unmarshal(data, &cfg)
	if cfg["detachKeys"] != "ctrl-x" {
		t.Errorf("other keys lost: %s", data)
	}
	a, found, err := ResolveAuthConfig(ctx, dir, DockerHub)
	if err != nil || !found || a.Username != "dave" || a.Password != "pw" {
		t.Fatalf("%+v %v %v", a, found, err)
	}

	installHelper(t, "berthstore", nil)
	helped := writeConfig(t, map[string]any{"credsStore": "berthstore"})
	if err := StoreAuthConfig(ctx, helped, "r.example", AuthConfig{Username: "e", Password: "f"}); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(filepath.Join(helped, "config.json"))
	if !strings.Contains(string(data), `"r.example": {}`) {
		t.Errorf("config.json should only record the registry: %s", data)
	}
}
