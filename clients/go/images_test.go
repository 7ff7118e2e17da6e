package berth_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	berth "github.com/berth-engine/berth/clients/go"
	"github.com/berth-engine/berth/clients/go/image"
	"github.com/berth-engine/berth/clients/go/internal/testenv"
	"github.com/berth-engine/berth/clients/go/jsonmessage"
	"github.com/berth-engine/berth/clients/go/registry"
)

// pull reads a pull to its end and returns its records; an in-stream error is returned.
func pull(t *testing.T, c *berth.Client, ref string, opts image.PullOptions) ([]jsonmessage.JSONMessage, error) {
	t.Helper()
	rc, err := c.ImagePull(context.Background(), ref, opts)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var seen []jsonmessage.JSONMessage
	err = jsonmessage.ReadStream(rc, func(m jsonmessage.JSONMessage) error {
		seen = append(seen, m)
		return nil
	})
	return seen, err
}

func removeImage(c *berth.Client, ref string) {
	_, _ = c.ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true})
}

func TestImagesPullListInspect(t *testing.T) {
	env := testenv.Load(t)
	c := newClient(t, env)
	ctx := context.Background()
	ref := env.Registries.Open.Host + "/busybox:latest"
	removeImage(c, ref)
	seen, err := pull(t, c, ref, image.PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	digest := regexp.MustCompile(`^Digest: sha256:[0-9a-f]{64}$`)
	if !slices.ContainsFunc(seen, func(m jsonmessage.JSONMessage) bool { return digest.MatchString(m.Status) }) {
		t.Errorf("no Digest record in %+v", seen)
	}
	list, err := c.ImageList(ctx, image.ListOptions{Filters: map[string][]string{"reference": {ref}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || !slices.Contains(list[0].RepoTags, ref) {
		t.Fatalf("list: %+v", list)
	}
	insp, err := c.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if insp.ID != list[0].ID || insp.Os != "linux" {
		t.Errorf("inspect: %+v", insp)
	}
}

func TestImagesPullWithCredentials(t *testing.T) {
	env := testenv.Load(t)
	c := newClient(t, env, berth.WithoutStoredCredentials())
	for _, reg := range []testenv.Registry{env.Registries.Basic, env.Registries.Token} {
		ref := reg.Host + "/busybox:latest"
		removeImage(c, ref)
		if _, err := pull(t, c, ref, image.PullOptions{}); err == nil {
			t.Errorf("%s: anonymous pull succeeded", reg.Host)
		}
		auth, _ := registry.EncodeAuthConfig(registry.AuthConfig{Username: reg.Username, Password: reg.Password, ServerAddress: reg.Host})
		if _, err := pull(t, c, ref, image.PullOptions{RegistryAuth: auth}); err != nil {
			t.Fatalf("%s: %v", reg.Host, err)
		}
		if _, err := c.ImageInspect(context.Background(), ref); err != nil {
			t.Fatal(err)
		}
		removeImage(c, ref)
	}
}

func TestImagesPullWithStoredCredentials(t *testing.T) {
	env := testenv.Load(t)
	basic, token := env.Registries.Basic, env.Registries.Token
	// A real credential helper for the token registry; an auths entry for the Basic one.
	bin := t.TempDir()
	script := fmt.Sprintf("#!/bin/sh\nread url\nif [ \"$1\" = get ] && [ \"$url\" = %q ]; then printf '{\"ServerURL\":\"%%s\",\"Username\":%q,\"Secret\":%q}' \"$url\"; exit 0; fi\necho 'credentials not found in native keychain'; exit 1\n", token.Host, token.Username, token.Password)
	if err := os.WriteFile(filepath.Join(bin, "docker-credential-berthtest"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	dir := t.TempDir()
	cfg, _ := json.Marshal(map[string]any{
		"auths":       map[string]any{basic.Host: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(basic.Username + ":" + basic.Password))}},
		"credHelpers": map[string]string{token.Host: "berthtest"},
	})
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, env, berth.WithConfigDir(dir))
	for _, reg := range []testenv.Registry{basic, token} {
		ref := reg.Host + "/busybox:1.35"
		removeImage(c, ref)
		if _, err := pull(t, c, ref, image.PullOptions{}); err != nil {
			t.Fatalf("%s: %v", reg.Host, err)
		}
		removeImage(c, ref)
	}
}

func TestImagesTagRemoveAndNotFound(t *testing.T) {
	env := testenv.Load(t)
	c := newClient(t, env)
	ctx := context.Background()
	ref := env.Registries.Open.Host + "/busybox:latest"
	if _, err := pull(t, c, ref, image.PullOptions{}); err != nil {
		t.Fatal(err)
	}
	target := "berth-client-test/" + testenv.UniqueName("tag") + ":v1"
	t.Cleanup(func() { removeImage(c, target) })
	if err := c.ImageTag(ctx, ref, target); err != nil {
		t.Fatal(err)
	}
	a, _ := c.ImageInspect(ctx, ref)
	b, err := c.ImageInspect(ctx, target)
	if err != nil || a.ID != b.ID {
		t.Fatalf("tagged image: %v %s %s", err, a.ID, b.ID)
	}
	del, err := c.ImageRemove(ctx, target, image.RemoveOptions{})
	if err != nil || len(del) != 1 || del[0].Untagged != target {
		t.Fatalf("remove: %+v %v", del, err)
	}
	_, err = c.ImageInspect(ctx, target)
	if !berth.IsErrNotFound(err) || !strings.Contains(err.Error(), "No such image") {
		t.Fatalf("inspect removed: %v", err)
	}
	_, err = pull(t, c, env.Registries.Open.Host+"/"+testenv.UniqueName("absent")+":latest", image.PullOptions{})
	var streamErr *jsonmessage.JSONError
	if !berth.IsErrNotFound(err) && !errorsAs(err, &streamErr) {
		t.Fatalf("pull of a missing repository: %v", err)
	}
}

func TestImagesPullStreamIsIncremental(t *testing.T) {
	env := testenv.Load(t)
	c := newClient(t, env)
	ref := env.Registries.Open.Host + "/layered:latest"
	removeImage(c, ref)
	t.Cleanup(func() { removeImage(c, ref) })
	rc, err := c.ImagePull(context.Background(), ref, image.PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The first record is readable before the pull is over; closing early must not hang.
	buf := make([]byte, 1)
	if _, err := io.ReadFull(rc, buf); err != nil {
		t.Fatal(err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestImagesPullErrorInsideTheStream(t *testing.T) {
	env := testenv.Load(t)
	c := newClient(t, env)
	ref := testenv.PushBrokenImage(t, env.Registries.Open.Host)
	seen, err := pull(t, c, ref, image.PullOptions{})
	var streamErr *jsonmessage.JSONError
	if !errorsAs(err, &streamErr) || streamErr.Message == "" {
		t.Fatalf("err = %#v", err)
	}
	if len(seen) == 0 {
		t.Error("no progress records before the error")
	}
}
