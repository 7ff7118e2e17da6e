// Compatibility of berthd with the official Go client (github.com/moby/moby/client, current
// release): the scenarios the clients' issue lists, run against the real berthd.
package compat

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/authconfig"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/client"
)

type testRegistry struct {
	Host     string `json:"host"`
	Username string `json:"username"`
	Password string `json:"password"`
}

type testEnv struct {
	DockerHost string `json:"dockerHost"`
	Registries struct {
		Open, Basic, Token testRegistry
	} `json:"registries"`
}

func loadEnv(t *testing.T) testEnv {
	t.Helper()
	file := os.Getenv("BERTH_CLIENT_TEST_ENV")
	if file == "" {
		t.Fatal("BERTH_CLIENT_TEST_ENV is not set: run the tests through scripts/test-clients.sh")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var e testEnv
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

func unique(prefix string) string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// newClient builds the official client the way programs do: from the environment.
func newClient(t *testing.T, env testEnv, extra ...client.Opt) *client.Client {
	t.Helper()
	t.Setenv("DOCKER_HOST", env.DockerHost)
	for _, k := range []string{"DOCKER_API_VERSION", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	c, err := client.New(append([]client.Opt{client.FromEnv}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func pullImage(t *testing.T, c *client.Client, ref, auth string) error {
	t.Helper()
	resp, err := c.ImagePull(context.Background(), ref, client.ImagePullOptions{RegistryAuth: auth})
	if err != nil {
		return err
	}
	defer resp.Close()
	return resp.Wait(context.Background())
}

func busybox(t *testing.T, env testEnv, c *client.Client) string {
	t.Helper()
	ref := env.Registries.Open.Host + "/busybox:latest"
	if err := pullImage(t, c, ref, ""); err != nil {
		t.Fatal(err)
	}
	return ref
}

func removeImage(c *client.Client, ref string) {
	_, _ = c.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true})
}

func createContainer(t *testing.T, c *client.Client, cfg *container.Config, name string) string {
	t.Helper()
	cfg.Labels = map[string]string{"berth-client-test": "compat-go"}
	res, err := c.ContainerCreate(context.Background(), client.ContainerCreateOptions{Config: cfg, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = c.ContainerRemove(context.Background(), res.ID, client.ContainerRemoveOptions{Force: true})
	})
	return res.ID
}

// runForeground does what `docker run` does without a TTY: wait registered before start, then logs.
func runForeground(t *testing.T, c *client.Client, id string) (int64, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wait := c.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := c.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	var code int64
	select {
	case err := <-wait.Error:
		t.Fatal(err)
	case res := <-wait.Result:
		code = res.StatusCode
	}
	logs, err := c.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	var out, errOut bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &errOut, logs); err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

func TestCompatVersionNegotiationWithNewerClient(t *testing.T) {
	env := loadEnv(t)
	c := newClient(t, env)
	if client.MaxAPIVersion == "" {
		t.Fatal("no MaxAPIVersion")
	}
	v, err := c.ServerVersion(context.Background(), client.ServerVersionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The client starts at its own maximum; after the first call it must use the daemon's.
	if c.ClientVersion() != v.APIVersion {
		t.Fatalf("client negotiated %s, daemon offers %s (client max %s)", c.ClientVersion(), v.APIVersion, client.MaxAPIVersion)
	}
	ping, err := c.Ping(context.Background(), client.PingOptions{})
	if err != nil || ping.APIVersion != v.APIVersion || ping.OSType != "linux" {
		t.Fatalf("ping %+v %v", ping, err)
	}
}

func TestCompatPinnedNewerVersionIsRefused(t *testing.T) {
	env := loadEnv(t)
	c := newClient(t, env, client.WithVersion(client.MaxAPIVersion))
	v, err := newClient(t, env).ServerVersion(context.Background(), client.ServerVersionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v.APIVersion == client.MaxAPIVersion {
		t.Skipf("berthd offers %s, the client's maximum: nothing newer to ask for", v.APIVersion)
	}
	_, err = c.ServerVersion(context.Background(), client.ServerVersionOptions{})
	if !cerrdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "is too new") {
		t.Fatalf("err = %v", err)
	}
}

func TestCompatRunForegroundWithDemultiplexedLogs(t *testing.T) {
	env := loadEnv(t)
	c := newClient(t, env)
	id := createContainer(t, c, &container.Config{Image: busybox(t, env, c), Cmd: []string{"sh", "-c", "echo hello; echo oops >&2; exit 2"}}, "")
	code, out, errOut := runForeground(t, c, id)
	if code != 2 || out != "hello\n" || errOut != "oops\n" {
		t.Fatalf("code %d stdout %q stderr %q", code, out, errOut)
	}
}

func TestCompatRunBackgroundListStop(t *testing.T) {
	env := loadEnv(t)
	c := newClient(t, env)
	ctx := context.Background()
	name := unique("compat-bg")
	id := createContainer(t, c, &container.Config{Image: busybox(t, env, c), Cmd: []string{"sleep", "300"}}, name)
	if _, err := c.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := c.ContainerList(ctx, client.ContainerListOptions{Filters: make(client.Filters).Add("name", name)})
	if err != nil || len(list.Items) != 1 || list.Items[0].ID != id || list.Items[0].State != container.StateRunning {
		t.Fatalf("list %+v %v", list, err)
	}
	timeout := 1
	if _, err := c.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &timeout}); err != nil {
		t.Fatal(err)
	}
	insp, err := c.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil || insp.Container.State.Running {
		t.Fatalf("after stop: %+v %v", insp.Container.State, err)
	}
	if _, err := c.ContainerInspect(ctx, unique("ghost"), client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Fatalf("missing container: %v", err)
	}
}

func TestCompatImageListAndPullWithoutCredentials(t *testing.T) {
	env := loadEnv(t)
	c := newClient(t, env)
	ref := env.Registries.Open.Host + "/busybox:latest"
	removeImage(c, ref)
	if err := pullImage(t, c, ref, ""); err != nil {
		t.Fatal(err)
	}
	list, err := c.ImageList(context.Background(), client.ImageListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(list.Items, func(i image.Summary) bool { return slices.Contains(i.RepoTags, ref) }) {
		t.Fatalf("%s not listed: %+v", ref, list.Items)
	}
}

func TestCompatPullWithCredentials(t *testing.T) {
	env := loadEnv(t)
	c := newClient(t, env)
	for _, reg := range []testRegistry{env.Registries.Basic, env.Registries.Token} {
		ref := reg.Host + "/busybox:latest"
		removeImage(c, ref)
		if err := pullImage(t, c, ref, ""); err == nil {
			t.Fatalf("%s: anonymous pull succeeded", reg.Host)
		}
		auth, err := authconfig.Encode(registry.AuthConfig{Username: reg.Username, Password: reg.Password, ServerAddress: reg.Host})
		if err != nil {
			t.Fatal(err)
		}
		if err := pullImage(t, c, ref, auth); err != nil {
			t.Fatalf("%s: %v", reg.Host, err)
		}
		removeImage(c, ref)
	}
}

func TestCompatCommitAndRunCommitted(t *testing.T) {
	env := loadEnv(t)
	c := newClient(t, env)
	id := createContainer(t, c, &container.Config{Image: busybox(t, env, c), Cmd: []string{"sh", "-c", "echo from-commit > /marker"}}, "")
	if code, _, _ := runForeground(t, c, id); code != 0 {
		t.Fatalf("exit %d", code)
	}
	ref := "berth-client-test/" + unique("compat-commit") + ":v1"
	t.Cleanup(func() { removeImage(c, ref) })
	res, err := c.ContainerCommit(context.Background(), id, client.ContainerCommitOptions{Reference: ref, Changes: []string{`CMD ["cat", "/marker"]`}})
	if err != nil || !strings.HasPrefix(res.ID, "sha256:") {
		t.Fatalf("commit %+v %v", res, err)
	}
	run := createContainer(t, c, &container.Config{Image: ref}, "")
	if code, out, _ := runForeground(t, c, run); code != 0 || out != "from-commit\n" {
		t.Fatalf("committed image ran with %d %q", code, out)
	}
}

func TestCompatFollowLogsAreStreamed(t *testing.T) {
	env := loadEnv(t)
	c := newClient(t, env)
	id := createContainer(t, c, &container.Config{Image: busybox(t, env, c), Cmd: []string{"sh", "-c", "echo first; sleep 2; echo second"}}, "")
	if _, err := c.ContainerStart(context.Background(), id, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	logs, err := c.ContainerLogs(context.Background(), id, client.ContainerLogsOptions{ShowStdout: true, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	pr, pw := io.Pipe()
	go func() { _, err := stdcopy.StdCopy(pw, io.Discard, logs); pw.CloseWithError(err) }()
	line := make([]byte, 6)
	start := time.Now()
	if _, err := io.ReadFull(pr, line); err != nil || string(line) != "first\n" {
		t.Fatalf("%q %v", line, err)
	}
	first := time.Since(start)
	rest, _ := io.ReadAll(pr)
	if string(rest) != "second\n" || time.Since(start)-first < time.Second {
		t.Fatalf("rest %q after %v", rest, time.Since(start)-first)
	}
}

func TestCompatPullLoginBasicAndToken(t *testing.T) {
	env := loadEnv(t)
	c := newClient(t, env)
	for _, reg := range []testRegistry{env.Registries.Basic, env.Registries.Token} {
		res, err := c.RegistryLogin(context.Background(), client.RegistryLoginOptions{Username: reg.Username, Password: reg.Password, ServerAddress: reg.Host})
		if err != nil || res.Auth.Status != "Login Succeeded" {
			t.Fatalf("%s: %+v %v", reg.Host, res, err)
		}
		_, err = c.RegistryLogin(context.Background(), client.RegistryLoginOptions{Username: reg.Username, Password: "wrong-password", ServerAddress: reg.Host})
		if !cerrdefs.IsUnauthorized(err) {
			t.Fatalf("%s wrong password: %v", reg.Host, err)
		}
	}
}
