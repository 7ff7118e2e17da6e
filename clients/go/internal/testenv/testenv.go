// Package testenv loads what the client tests run against: a berthd and seeded registries
// started by the project's test harness, described by the JSON file BERTH_CLIENT_TEST_ENV names.
package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
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
