// Package berth is a client for Berth and other daemons that speak the Docker Engine API.
//
// Its shape follows the official Go client's: NewClientWithOpts(FromEnv,
// WithAPIVersionNegotiation()) and methods named after the operations (ContainerCreate,
// ImagePull...), with request and response types in the container, image, network and
// registry packages and a multiplexed-stream reader in stdcopy. It uses only the standard library.
package berth

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/berth-engine/berth/clients/go/registry"
)

const (
	// DefaultDockerHost is Berth's socket.
	DefaultDockerHost = "unix:///run/berth/berth.sock"
	// DefaultVersion is the newest API version this client was written against.
	DefaultVersion = "1.55"
	// fallbackVersion is assumed for a daemon whose ping carries no Api-Version header.
	fallbackVersion = "1.24"
	// unixHostPlaceholder is the Host header of requests over a unix socket.
	unixHostPlaceholder = "api.moby.localhost"
)

// Client talks to one daemon. It is safe for concurrent use.
type Client struct {
	host      string
	proto     string // unix or tcp
	addr      string // socket path or host:port
	scheme    string // http or https
	tlsConfig *tls.Config
	client    *http.Client
	custom    bool // the caller supplied the http.Client

	version        string
	manualOverride bool // version pinned by WithVersion or DOCKER_API_VERSION
	negotiate      bool
	negotiated     bool
	mu             sync.Mutex

	useStoredCredentials bool
	configDir            string
	userAgent            string
}

// Opt configures a Client.
type Opt func(*Client) error

// NewClientWithOpts builds a client for DefaultDockerHost, then applies the options in order.
func NewClientWithOpts(ops ...Opt) (*Client, error) {
	c := &Client{scheme: "http", version: DefaultVersion, useStoredCredentials: true, userAgent: "berth-go-client"}
	if err := WithHost(DefaultDockerHost)(c); err != nil {
		return nil, err
	}
	for _, op := range ops {
		if err := op(c); err != nil {
			return nil, err
		}
	}
	if c.configDir == "" {
		c.configDir = registry.ConfigDir()
	}
	if !c.custom {
		c.client = &http.Client{Transport: c.transport()}
	}
	return c, nil
}

func (c *Client) transport() *http.Transport {
	t := &http.Transport{
		MaxIdleConns:    16,
		IdleConnTimeout: 90 * time.Second,
		TLSClientConfig: c.tlsConfig,
	}
	if c.proto == "unix" {
		path := c.addr
		t.DisableCompression = true
		t.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
	} else {
		t.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	return t
}

// Close releases idle connections.
func (c *Client) Close() error {
	c.client.CloseIdleConnections()
	return nil
}

// DaemonHost is the daemon address in DOCKER_HOST form.
func (c *Client) DaemonHost() string { return c.host }

// ClientVersion is the API version requests use (after negotiation, if it has happened).
func (c *Client) ClientVersion() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// NegotiateAPIVersion pings the daemon and settles on min(client version, daemon version). It
// does nothing when the version was pinned.
func (c *Client) NegotiateAPIVersion(ctx context.Context) {
	if c.manualOverride {
		return
	}
	if p, err := c.Ping(ctx); err == nil {
		c.NegotiateAPIVersionPing(p)
	}
}

// NegotiateAPIVersionPing applies a ping result as NegotiateAPIVersion does.
func (c *Client) NegotiateAPIVersionPing(p Ping) {
	if c.manualOverride {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	server := p.APIVersion
	if server == "" {
		server = fallbackVersion
	}
	if compareVersions(server, DefaultVersion) < 0 {
		c.version = server
	} else {
		c.version = DefaultVersion
	}
	c.negotiated = true
}

// versionForRequest negotiates once, lazily, when asked to.
func (c *Client) versionForRequest(ctx context.Context) string {
	c.mu.Lock()
	need := c.negotiate && !c.negotiated && !c.manualOverride
	c.mu.Unlock()
	if need {
		c.NegotiateAPIVersion(ctx)
	}
	return c.ClientVersion()
}

func parseHost(host string) (proto, addr string, err error) {
	if strings.HasPrefix(host, "/") {
		return "unix", host, nil
	}
	scheme, rest, ok := strings.Cut(host, "://")
	if !ok {
		return "", "", fmt.Errorf("unable to parse docker host %q", host)
	}
	switch scheme {
	case "unix":
		if !strings.HasPrefix(rest, "/") {
			return "", "", fmt.Errorf("unix host %q needs an absolute socket path", host)
		}
		return "unix", rest, nil
	case "tcp", "http", "https":
		u, err := url.Parse("tcp://" + rest)
		if err != nil {
			return "", "", fmt.Errorf("unable to parse docker host %q: %w", host, err)
		}
		if u.Path != "" && u.Path != "/" {
			return "", "", fmt.Errorf("docker host %q must not carry a path", host)
		}
		return "tcp", u.Host, nil
	default:
		return "", "", fmt.Errorf("unsupported protocol %q in docker host %q", scheme, host)
	}
}

func compareVersions(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) || i < len(pb); i++ {
		var x, y int
		if i < len(pa) {
			fmt.Sscan(pa[i], &x)
		}
		if i < len(pb) {
			fmt.Sscan(pb[i], &y)
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}
