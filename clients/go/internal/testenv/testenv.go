// Package testenv loads what the client tests run against: a berthd and seeded registries
// started by the project's test harness, described by the JSON file BERTH_CLIENT_TEST_ENV names.
package testenv

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"testing"
)

// Registry is one seeded registry.
type Registry struct {
	Host     string `json:"host"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// Env describes the daemon and registries.
type Env struct {
	// DockerHost is berthd's address in DOCKER_HOST form.
	DockerHost string `json:"dockerHost"`
	Registries struct {
		Open  Registry `json:"open"`
		Basic Registry `json:"basic"`
		Token Registry `json:"token"`
	} `json:"registries"`
	// HubMirror is set when berthd pulls docker.io images through a mirror holding busybox.
	HubMirror string `json:"hubMirror,omitempty"`
}

// Load reads the environment file or fails the test.
func Load(t testing.TB) Env {
	t.Helper()
	file := os.Getenv("BERTH_CLIENT_TEST_ENV")
	if file == "" {
		t.Fatal("BERTH_CLIENT_TEST_ENV is not set: run the tests through scripts/test-clients.sh")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var e Env
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return e
}

// UniqueName is a name unique to this run, for containers and tags a test creates.
func UniqueName(prefix string) string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// PushBrokenImage pushes to an open registry an image whose only layer is random bytes (valid
// digests, not a tar): a daemon fails on it after the pull has begun, inside the stream.
func PushBrokenImage(t testing.TB, registryHost string) string {
	t.Helper()
	name := UniqueName("broken")
	base := "http://" + registryHost + "/v2/" + name
	upload := func(data []byte) string {
		sum := sha256.Sum256(data)
		digest := "sha256:" + hex.EncodeToString(sum[:])
		resp, err := http.Post(base+"/blobs/uploads/", "", nil)
		if err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("blob upload start: %v %v", resp, err)
		}
		resp.Body.Close()
		loc, err := url.Parse(resp.Header.Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		loc = (&url.URL{Scheme: "http", Host: registryHost}).ResolveReference(loc)
		q := loc.Query()
		q.Set("digest", digest)
		loc.RawQuery = q.Encode()
		req, _ := http.NewRequest(http.MethodPut, loc.String(), bytes.NewReader(data))
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err = http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("blob upload: %v %v", resp, err)
		}
		resp.Body.Close()
		return digest
	}
	layer := make([]byte, 4096)
	_, _ = rand.Read(layer)
	layerDigest := upload(layer)
	config, _ := json.Marshal(map[string]any{"architecture": "amd64", "os": "linux", "rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerDigest}}, "config": map[string]any{}})
	configDigest := upload(config)
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": configDigest, "size": len(config)},
		"layers":        []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layerDigest, "size": len(layer)}},
	})
	req, _ := http.NewRequest(http.MethodPut, base+"/manifests/latest", bytes.NewReader(manifest))
	req.Header.Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("manifest upload: %v %v", resp, err)
	}
	resp.Body.Close()
	return registryHost + "/" + name + ":latest"
}
