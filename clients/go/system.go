package berth

import (
	"context"
	"net/http"

	"github.com/berth-engine/berth/clients/go/registry"
)

// Ping is what /_ping tells about the daemon.
type Ping struct {
	APIVersion     string
	OSType         string
	Experimental   bool
	BuilderVersion string
	SwarmStatus    string
}

// ComponentVersion is one component of a Version reply.
type ComponentVersion struct {
	Name    string
	Version string
	Details map[string]string `json:",omitempty"`
}

// Version is the reply of ServerVersion.
type Version struct {
	Platform      struct{ Name string } `json:",omitempty"`
	Components    []ComponentVersion    `json:",omitempty"`
	Version       string
	APIVersion    string `json:"ApiVersion"`
	MinAPIVersion string `json:"MinAPIVersion,omitempty"`
	GitCommit     string
	GoVersion     string
	Os            string
	Arch          string
	KernelVersion string `json:",omitempty"`
	Experimental  bool   `json:",omitempty"`
	BuildTime     string `json:",omitempty"`
}

// Ping asks the daemon for its API version: HEAD /_ping first, GET when HEAD is refused.
func (c *Client) Ping(ctx context.Context) (Ping, error) {
	resp, err := c.do(ctx, request{method: http.MethodHead, path: "/_ping", unversioned: true})
	if err != nil {
		if ctx.Err() != nil {
			return Ping{}, err
		}
		resp, err = c.do(ctx, request{method: http.MethodGet, path: "/_ping", unversioned: true})
		if err != nil {
			return Ping{}, err
		}
	}
	defer resp.Body.Close()
	h := resp.Header
	return Ping{
		APIVersion:     h.Get("Api-Version"),
		OSType:         h.Get("Ostype"),
		Experimental:   h.Get("Docker-Experimental") == "true",
		BuilderVersion: h.Get("Builder-Version"),
		SwarmStatus:    h.Get("Swarm"),
	}, nil
}

// ServerVersion returns the daemon's version information.
func (c *Client) ServerVersion(ctx context.Context) (Version, error) {
	var v Version
	err := c.doJSON(ctx, request{method: http.MethodGet, path: "/version"}, &v)
	return v, err
}

// RegistryLogin checks credentials against a registry through the daemon (POST /auth). It
// stores nothing; see StoreCredentials.
func (c *Client) RegistryLogin(ctx context.Context, auth registry.AuthConfig) (registry.AuthenticateOKBody, error) {
	var out registry.AuthenticateOKBody
	err := c.doJSON(ctx, request{method: http.MethodPost, path: "/auth", body: auth}, &out)
	return out, err
}

// StoreCredentials keeps credentials in the client's config.json (or the credential helper it
// names), where later pulls find them.
func (c *Client) StoreCredentials(ctx context.Context, auth registry.AuthConfig) error {
	return registry.StoreAuthConfig(ctx, c.configDir, registry.HostOfServerAddress(auth.ServerAddress), auth)
}
