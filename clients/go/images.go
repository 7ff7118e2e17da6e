package berth

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/berth-engine/berth/clients/go/image"
	"github.com/berth-engine/berth/clients/go/registry"
)

// ImageList lists images.
func (c *Client) ImageList(ctx context.Context, options image.ListOptions) ([]image.Summary, error) {
	q := url.Values{}
	boolQuery(q, "all", options.All)
	boolQuery(q, "shared-size", options.SharedSize)
	boolQuery(q, "manifests", options.Manifests)
	if err := filtersQuery(q, options.Filters); err != nil {
		return nil, err
	}
	var out []image.Summary
	err := c.doJSON(ctx, request{method: http.MethodGet, path: "/images/json", query: q}, &out)
	return out, err
}

// ImagePull starts a pull and returns its progress stream: JSON records, one per line. The pull
// is complete only when the stream has been read to its end; read it with
// jsonmessage.ReadStream or DisplayStream to turn an error reported inside it into an error.
//
// Credentials come from options.RegistryAuth, else (unless WithoutStoredCredentials) from
// config.json and its credential helpers.
func (c *Client) ImagePull(ctx context.Context, refStr string, options image.PullOptions) (io.ReadCloser, error) {
	repo, tag := registry.SplitReference(refStr)
	q := url.Values{}
	q.Set("fromImage", repo)
	if !options.All {
		if tag == "" {
			tag = "latest"
		}
		q.Set("tag", tag)
	}
	if options.Platform != "" {
		q.Set("platform", strings.ToLower(options.Platform))
	}
	auth := options.RegistryAuth
	if auth == "" && c.useStoredCredentials {
		stored, found, err := registry.ResolveAuthConfig(ctx, c.configDir, registry.HostOf(repo))
		if err != nil {
			return nil, err
		}
		if found {
			if auth, err = registry.EncodeAuthConfig(stored); err != nil {
				return nil, err
			}
		}
	}
	h := http.Header{}
	if auth != "" {
		h.Set("X-Registry-Auth", auth)
	}
	resp, err := c.do(ctx, request{method: http.MethodPost, path: "/images/create", query: q, headers: h})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// ImageInspect returns an image's configuration and metadata.
func (c *Client) ImageInspect(ctx context.Context, imageID string) (image.InspectResponse, error) {
	var out image.InspectResponse
	err := c.doJSON(ctx, request{method: http.MethodGet, path: "/images/" + pathEscape(imageID) + "/json"}, &out)
	return out, err
}

// ImageRemove untags and, when nothing else refers to it, deletes an image.
func (c *Client) ImageRemove(ctx context.Context, imageID string, options image.RemoveOptions) ([]image.DeleteResponse, error) {
	q := url.Values{}
	boolQuery(q, "force", options.Force)
	if !options.PruneChildren {
		q.Set("noprune", "1")
	}
	var out []image.DeleteResponse
	err := c.doJSON(ctx, request{method: http.MethodDelete, path: "/images/" + pathEscape(imageID), query: q}, &out)
	return out, err
}

// ImageTag gives the image source the name target ("repo" or "repo:tag").
func (c *Client) ImageTag(ctx context.Context, source, target string) error {
	repo, tag := splitRepoTag(target)
	if tag == "" {
		tag = "latest"
	}
	q := url.Values{"repo": {repo}, "tag": {tag}}
	return c.doJSON(ctx, request{method: http.MethodPost, path: "/images/" + pathEscape(source) + "/tag", query: q}, nil)
}

// splitRepoTag splits "repo:tag" (a digest is not a tag here).
func splitRepoTag(ref string) (repo, tag string) {
	if colon := strings.LastIndexByte(ref, ':'); colon > strings.LastIndexByte(ref, '/') {
		return ref[:colon], ref[colon+1:]
	}
	return ref, ""
}
