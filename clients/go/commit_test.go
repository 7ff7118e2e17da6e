package berth_test

import (
	"context"
	"strings"
	"testing"

	"github.com/berth-engine/berth/clients/go/container"
	"github.com/berth-engine/berth/clients/go/internal/testenv"
)

func TestCommitAndRunCommitted(t *testing.T) {
	env := testenv.Load(t)
	c := newClient(t, env)
	ctx := context.Background()
	id := create(t, c, &container.Config{Image: busybox(t, env, c), Cmd: []string{"sh", "-c", "echo committed-content > /marker"}}, "")
	if code := runToExit(t, c, id); code != 0 {
		t.Fatalf("exit %d", code)
	}
	ref := "berth-client-test/" + testenv.UniqueName("committed") + ":v1"
	t.Cleanup(func() { removeImage(c, ref) })
	resp, err := c.ContainerCommit(ctx, id, container.CommitOptions{Reference: ref, Comment: "from the Go client", Changes: []string{`CMD ["cat", "/marker"]`}})
	if err != nil || !strings.HasPrefix(resp.ID, "sha256:") {
		t.Fatalf("commit: %+v %v", resp, err)
	}
	insp, err := c.ImageInspect(ctx, ref)
	if err != nil || insp.ID != resp.ID || insp.Comment != "from the Go client" || strings.Join(insp.Config.Cmd, " ") != "cat /marker" {
		t.Fatalf("committed image: %+v %v", insp, err)
	}
	run := create(t, c, &container.Config{Image: ref}, "")
	if code := runToExit(t, c, run); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if out, _ := logs(t, c, run, container.LogsOptions{ShowStdout: true}); out != "committed-content\n" {
		t.Fatalf("output of the committed image: %q", out)
	}
}
