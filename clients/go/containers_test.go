package berth_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	berth "github.com/berth-engine/berth/clients/go"
	"github.com/berth-engine/berth/clients/go/container"
	"github.com/berth-engine/berth/clients/go/image"
	"github.com/berth-engine/berth/clients/go/internal/testenv"
	"github.com/berth-engine/berth/clients/go/stdcopy"
)

var testLabels = map[string]string{"berth-client-test": "go"}

// busybox pulls the seeded busybox and returns its reference.
func busybox(t *testing.T, env testenv.Env, c *berth.Client) string {
	t.Helper()
	ref := env.Registries.Open.Host + "/busybox:latest"
	if _, err := pull(t, c, ref, image.PullOptions{}); err != nil {
		t.Fatal(err)
	}
	return ref
}

func create(t *testing.T, c *berth.Client, cfg *container.Config, name string) string {
	t.Helper()
	if cfg.Labels == nil {
		cfg.Labels = testLabels
	}
	resp, err := c.ContainerCreate(context.Background(), cfg, nil, nil, nil, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.ContainerRemove(context.Background(), resp.ID, container.RemoveOptions{Force: true})
	})
	return resp.ID
}

// waitExit registers a wait, starts the container and returns its exit status.
func runToExit(t *testing.T, c *berth.Client, id string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	statusC, errC := c.ContainerWait(ctx, id, container.WaitConditionNextExit)
	if err := c.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errC:
		t.Fatal(err)
	case s := <-statusC:
		if s.Error != nil && s.Error.Message != "" {
			t.Fatal(s.Error.Message)
		}
		return s.StatusCode
	}
	return -1
}

func logs(t *testing.T, c *berth.Client, id string, opts container.LogsOptions) (string, string) {
	t.Helper()
	rc, err := c.ContainerLogs(context.Background(), id, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var out, errOut bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &errOut, rc); err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String()
}

func TestContainersRunForegroundWithDemultiplexedLogs(t *testing.T) {
	env := testenv.Load(t)
	c := newClient(t, env)
	id := create(t, c, &container.Config{Image: busybox(t, env, c), Cmd: []string{"sh", "-c", "echo out1; echo err1 >&2; echo out2; exit 3"}}, "")
	if code := runToExit(t, c, id); code != 3 {
		t.Fatalf("exit code %d", code)
	}
	out, errOut := logs(t, c, id, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if out != "out1\nout2\n" || errOut != "err1\n" {
		t.Fatalf("stdout %q stderr %q", out, errOut)
	}
	out, errOut = logs(t, c, id, container.LogsOptions{ShowStderr: true})
	if out != "" || errOut != "err1\n" {
		t.Fatalf("stderr only: stdout %q stderr %q", out, errOut)
	}
}

func TestContainersTTYLogsAreRaw(t *testing.T) {
	env := testenv.Load(t)
	c := newClient(t, env)
	id := create(t, c, &container.Config{Image: busybox(t, env, c), Tty: true, Cmd: []string{"sh", "-c", "echo tty-out; echo tty-err >&2"}}, "")
	runToExit(t, c, id)
	rc, err := c.ContainerLogs(context.Background(), id, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	raw, _ := io.ReadAll(rc)
	text := strings.ReplaceAll(string(raw), "\r\n", "\n")
	if !strings.Contains(text, "tty-out\n") || !strings.Contains(text, "tty-err\n") {
		t.Fatalf("raw log %q", raw)
	}
}

func TestContainersBackgroundListStopKillRemove(t *testing.T) {
	env := testenv.Load(t)
	c := newClient(t, env)
	ctx := context.Background()
	name := testenv.UniqueName("bg")
	id := create(t, c, &container.Config{Image: busybox(t, env, c), Cmd: []string{"sleep", "300"}, Labels: map[string]string{"run": name}}, name)
	if err := c.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	filter := map[string][]string{"label": {"run=" + name}}
	list, err := c.ContainerList(ctx, container.ListOptions{Filters: filter})
	if err != nil || len(list) != 1 || list[0].ID != id || list[0].State != "running" || list[0].Names[0] != "/"+name {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := c.ContainerRemove(ctx, id, container.RemoveOptions{}); !berth.IsErrConflict(err) {
		t.Fatalf("removing a running container: %v", err)
	}
	if _, err := c.ContainerCreate(ctx, &container.Config{Image: list[0].Image}, nil, nil, nil, name); !berth.IsErrConflict(err) || !strings.Contains(err.Error(), "already in use") {
		t.Fatalf("duplicate name: %v", err)
	}
	timeout := 1
	if err := c.ContainerStop(ctx, id, container.StopOptions{Timeout: &timeout}); err != nil {
		t.Fatal(err)
	}
	if list, _ := c.ContainerList(ctx, container.ListOptions{Filters: filter}); len(list) != 0 {
		t.Fatalf("stopped container still listed as running: %+v", list)
	}
	if list, _ := c.ContainerList(ctx, container.ListOptions{All: true, Filters: filter}); len(list) != 1 {
		t.Fatalf("all=true: %+v", list)
	}
	if err := c.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	statusC, errC := c.ContainerWait(ctx, id, container.WaitConditionNextExit)
	if err := c.ContainerKill(ctx, id, "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errC:
		t.Fatal(err)
	case s := <-statusC:
		if s.StatusCode != 137 {
			t.Fatalf("killed: %+v", s)
		}
	}
	if err := c.ContainerRemove(ctx, id, container.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ContainerInspect(ctx, name); !berth.IsErrNotFound(err) || !strings.Contains(err.Error(), "No such container: "+name) {
		t.Fatalf("inspect removed: %v", err)
	}
}

func TestContainersFollowLogsStream(t *testing.T) {
	env := testenv.Load(t)
	c := newClient(t, env)
	id := create(t, c, &container.Config{Image: busybox(t, env, c), Cmd: []string{"sh", "-c", "echo first; sleep 2; echo second"}}, "")
	if err := c.ContainerStart(context.Background(), id, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	rc, err := c.ContainerLogs(context.Background(), id, container.LogsOptions{ShowStdout: true, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	pr, pw := io.Pipe()
	go func() { _, err := stdcopy.StdCopy(pw, io.Discard, rc); pw.CloseWithError(err) }()
	start := time.Now()
	line := make([]byte, len("first\n"))
	if _, err := io.ReadFull(pr, line); err != nil || string(line) != "first\n" {
		t.Fatalf("%q %v", line, err)
	}
	firstAt := time.Since(start)
	rest, err := io.ReadAll(pr)
	if err != nil || string(rest) != "second\n" {
		t.Fatalf("%q %v", rest, err)
	}
	if gap := time.Since(start) - firstAt; gap < time.Second {
		t.Fatalf("lines arrived together (%v apart): the stream was buffered", gap)
	}
}

func TestContainersCreateWithMissingImageIsNotFound(t *testing.T) {
	env := testenv.Load(t)
	c := newClient(t, env)
	_, err := c.ContainerCreate(context.Background(), &container.Config{Image: "berth-client-test/" + testenv.UniqueName("absent")}, nil, nil, nil, "")
	if !berth.IsErrNotFound(err) || !strings.Contains(err.Error(), "No such image") {
		t.Fatalf("err = %v", err)
	}
}

// The Engine API's Go SDK example, built as it is and run against berthd. It pulls
// docker.io/library/busybox, so it needs berthd configured with a mirror that has it.
func TestContainersSDKExample(t *testing.T) {
	env := testenv.Load(t)
	if env.HubMirror == "" {
		t.Fatal("the test berthd has no docker.io mirror (hubMirror in the test environment): the SDK example cannot pull docker.io/library/busybox")
	}
	cmd := exec.Command("go", "run", "./examples/run-container")
	cmd.Env = append(os.Environ(), "DOCKER_HOST="+env.DockerHost, "DOCKER_API_VERSION=", "DOCKER_CERT_PATH=", "DOCKER_CONFIG="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.HasSuffix(string(out), "hello world\n") {
		t.Fatalf("output does not end in hello world:\n%s", out)
	}
}
