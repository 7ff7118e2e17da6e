package berth

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/berth-engine/berth/clients/go/container"
	"github.com/berth-engine/berth/clients/go/network"
)

// Platform selects the image variant a container is created from (the OCI platform fields).
type Platform struct {
	Architecture string   `json:"architecture"`
	OS           string   `json:"os"`
	OSVersion    string   `json:"os.version,omitempty"`
	OSFeatures   []string `json:"os.features,omitempty"`
	Variant      string   `json:"variant,omitempty"`
}

func (p *Platform) String() string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

type createBody struct {
	*container.Config
	HostConfig       *container.HostConfig     `json:"HostConfig,omitempty"`
	NetworkingConfig *network.NetworkingConfig `json:"NetworkingConfig,omitempty"`
}

// ContainerCreate creates a container. A missing image is a not-found error.
func (c *Client) ContainerCreate(ctx context.Context, config *container.Config, hostConfig *container.HostConfig, networkingConfig *network.NetworkingConfig, platform *Platform, name string) (container.CreateResponse, error) {
	var out container.CreateResponse
	if config == nil {
		config = &container.Config{}
	}
	q := url.Values{}
	if name != "" {
		q.Set("name", name)
	}
	if platform != nil && platform.OS != "" {
		q.Set("platform", platform.String())
	}
	err := c.doJSON(ctx, request{method: http.MethodPost, path: "/containers/create", query: q, body: createBody{config, hostConfig, networkingConfig}}, &out)
	return out, err
}

// ContainerStart starts a container; starting a running one is not an error.
func (c *Client) ContainerStart(ctx context.Context, containerID string, options container.StartOptions) error {
	q := url.Values{}
	if options.CheckpointID != "" {
		q.Set("checkpoint", options.CheckpointID)
	}
	if options.CheckpointDir != "" {
		q.Set("checkpoint-dir", options.CheckpointDir)
	}
	return c.doJSON(ctx, request{method: http.MethodPost, path: "/containers/" + pathEscape(containerID) + "/start", query: q}, nil)
}

// ContainerWait waits for a container to meet condition (not-running when empty). The call
// returns once the daemon has accepted the wait, so a start issued afterwards is not missed.
// Exactly one of the channels then delivers: the exit status, or an error.
func (c *Client) ContainerWait(ctx context.Context, containerID string, condition container.WaitCondition) (<-chan container.WaitResponse, <-chan error) {
	resultC := make(chan container.WaitResponse, 1)
	errC := make(chan error, 1)
	q := url.Values{}
	if condition != "" {
		q.Set("condition", string(condition))
	}
	resp, err := c.do(ctx, request{method: http.MethodPost, path: "/containers/" + pathEscape(containerID) + "/wait", query: q})
	if err != nil {
		errC <- err
		return resultC, errC
	}
	go func() {
		defer resp.Body.Close()
		// Keep what was read so a body that does not parse (a proxy cut the connection) can be shown.
		var seen bytes.Buffer
		var res container.WaitResponse
		if err := json.NewDecoder(io.TeeReader(io.LimitReader(resp.Body, 1<<20), &seen)).Decode(&res); err != nil {
			text := seen.String()
			if len(text) > 2048 {
				text = text[:2048]
			}
			errC <- fmt.Errorf("error waiting for container: %w (reply: %q)", err, text)
			return
		}
		resultC <- res
	}()
	return resultC, errC
}

// ContainerLogs returns the container's log stream, read as it arrives. Without a TTY it is
// multiplexed: split it with stdcopy.StdCopy. With a TTY it is the raw output.
func (c *Client) ContainerLogs(ctx context.Context, containerID string, options container.LogsOptions) (io.ReadCloser, error) {
	q := url.Values{}
	boolQuery(q, "stdout", options.ShowStdout)
	boolQuery(q, "stderr", options.ShowStderr)
	boolQuery(q, "timestamps", options.Timestamps)
	boolQuery(q, "details", options.Details)
	boolQuery(q, "follow", options.Follow)
	if options.Since != "" {
		q.Set("since", options.Since)
	}
	if options.Until != "" {
		q.Set("until", options.Until)
	}
	if options.Tail != "" {
		q.Set("tail", options.Tail)
	}
	resp, err := c.do(ctx, request{method: http.MethodGet, path: "/containers/" + pathEscape(containerID) + "/logs", query: q})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// ContainerList lists containers (running ones unless All is set).
func (c *Client) ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error) {
	q := url.Values{}
	boolQuery(q, "all", options.All)
	boolQuery(q, "size", options.Size)
	if options.Limit > 0 {
		q.Set("limit", strconv.Itoa(options.Limit))
	}
	if err := filtersQuery(q, options.Filters); err != nil {
		return nil, err
	}
	var out []container.Summary
	err := c.doJSON(ctx, request{method: http.MethodGet, path: "/containers/json", query: q}, &out)
	return out, err
}

// ContainerInspect returns a container's configuration and state.
func (c *Client) ContainerInspect(ctx context.Context, containerID string) (container.InspectResponse, error) {
	var out container.InspectResponse
	err := c.doJSON(ctx, request{method: http.MethodGet, path: "/containers/" + pathEscape(containerID) + "/json"}, &out)
	return out, err
}

// ContainerStop stops a container: its stop signal, then SIGKILL after the timeout.
func (c *Client) ContainerStop(ctx context.Context, containerID string, options container.StopOptions) error {
	q := url.Values{}
	if options.Timeout != nil {
		q.Set("t", strconv.Itoa(*options.Timeout))
	}
	if options.Signal != "" {
		q.Set("signal", options.Signal)
	}
	return c.doJSON(ctx, request{method: http.MethodPost, path: "/containers/" + pathEscape(containerID) + "/stop", query: q}, nil)
}

// ContainerKill sends a signal (SIGKILL when empty) to a running container.
func (c *Client) ContainerKill(ctx context.Context, containerID, signal string) error {
	q := url.Values{}
	if signal != "" {
		q.Set("signal", signal)
	}
	return c.doJSON(ctx, request{method: http.MethodPost, path: "/containers/" + pathEscape(containerID) + "/kill", query: q}, nil)
}

// ContainerRemove removes a container.
func (c *Client) ContainerRemove(ctx context.Context, containerID string, options container.RemoveOptions) error {
	q := url.Values{}
	boolQuery(q, "v", options.RemoveVolumes)
	boolQuery(q, "link", options.RemoveLinks)
	boolQuery(q, "force", options.Force)
	return c.doJSON(ctx, request{method: http.MethodDelete, path: "/containers/" + pathEscape(containerID), query: q}, nil)
}

// ContainerCommit makes an image of a container's filesystem and configuration.
func (c *Client) ContainerCommit(ctx context.Context, containerID string, options container.CommitOptions) (container.CommitResponse, error) {
	q := url.Values{}
	q.Set("container", containerID)
	if options.Reference != "" {
		repo, tag := splitRepoTag(options.Reference)
		q.Set("repo", repo)
		if tag != "" {
			q.Set("tag", tag)
		}
	}
	if options.Comment != "" {
		q.Set("comment", options.Comment)
	}
	if options.Author != "" {
		q.Set("author", options.Author)
	}
	for _, ch := range options.Changes {
		q.Add("changes", ch)
	}
	if !options.Pause {
		q.Set("pause", "0")
	}
	var out container.CommitResponse
	r := request{method: http.MethodPost, path: "/commit", query: q}
	if options.Config != nil {
		r.body = options.Config
	}
	err := c.doJSON(ctx, r, &out)
	return out, err
}
