package berth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// FromEnv configures the client from DOCKER_HOST, DOCKER_API_VERSION, DOCKER_CERT_PATH and
// DOCKER_TLS_VERIFY, as the docker CLI reads them.
func FromEnv(c *Client) error {
	for _, op := range []Opt{WithTLSClientConfigFromEnv(), WithHostFromEnv(), WithVersionFromEnv()} {
		if err := op(c); err != nil {
			return err
		}
	}
	return nil
}

// WithHost sets the daemon address: unix:///path, tcp://host:port, or a socket path.
func WithHost(host string) Opt {
	return func(c *Client) error {
		proto, addr, err := parseHost(host)
		if err != nil {
			return err
		}
		if proto == "tcp" {
			if _, _, err := net.SplitHostPort(addr); err != nil {
				port := "2375"
				if c.tlsConfig != nil {
					port = "2376"
				}
				addr = net.JoinHostPort(strings.Trim(addr, "[]"), port)
			}
		}
		c.host, c.proto, c.addr = host, proto, addr
		return nil
	}
}

// WithHostFromEnv applies DOCKER_HOST when set.
func WithHostFromEnv() Opt {
	return func(c *Client) error {
		if h := os.Getenv("DOCKER_HOST"); h != "" {
			return WithHost(h)(c)
		}
		return nil
	}
}

// WithVersion pins the API version: no negotiation happens.
func WithVersion(version string) Opt {
	return func(c *Client) error {
		version = strings.TrimPrefix(version, "v")
		if version == "" {
			return nil
		}
		c.version, c.manualOverride = version, true
		return nil
	}
}

// WithVersionFromEnv pins the version to DOCKER_API_VERSION when set.
func WithVersionFromEnv() Opt {
	return func(c *Client) error { return WithVersion(os.Getenv("DOCKER_API_VERSION"))(c) }
}

// WithAPIVersionNegotiation makes the client ask /_ping for the daemon's version before its
// first request and use the lower of the two. A pinned version wins.
func WithAPIVersionNegotiation() Opt {
	return func(c *Client) error {
		c.negotiate = true
		return nil
	}
}

// WithHTTPClient uses a caller-built http.Client (its transport must reach the daemon).
func WithHTTPClient(hc *http.Client) Opt {
	return func(c *Client) error {
		if hc == nil {
			return errors.New("nil http client")
		}
		c.client, c.custom = hc, true
		return nil
	}
}

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Opt {
	return func(c *Client) error {
		c.userAgent = ua
		return nil
	}
}

// WithConfigDir sets where config.json (stored registry credentials) is read and written;
// $DOCKER_CONFIG or ~/.docker by default.
func WithConfigDir(dir string) Opt {
	return func(c *Client) error {
		c.configDir = dir
		return nil
	}
}

// WithoutStoredCredentials stops ImagePull from looking up stored credentials when the caller
// gives none.
func WithoutStoredCredentials() Opt {
	return func(c *Client) error {
		c.useStoredCredentials = false
		return nil
	}
}

// WithTLSClientConfig enables TLS with a CA file and a client certificate and key (mutual TLS).
// Empty paths are skipped: no CA means the system roots, no certificate means plain TLS.
func WithTLSClientConfig(caPath, certPath, keyPath string) Opt {
	return func(c *Client) error {
		cfg, err := tlsConfig(caPath, certPath, keyPath)
		if err != nil {
			return err
		}
		c.tlsConfig, c.scheme = cfg, "https"
		return nil
	}
}

// WithTLSClientConfigFromEnv applies DOCKER_CERT_PATH (ca.pem, cert.pem, key.pem) and
// DOCKER_TLS_VERIFY: when DOCKER_TLS_VERIFY is empty the daemon's certificate is not verified.
func WithTLSClientConfigFromEnv() Opt {
	return func(c *Client) error {
		dir := os.Getenv("DOCKER_CERT_PATH")
		if dir == "" {
			return nil
		}
		if err := WithTLSClientConfig(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))(c); err != nil {
			return err
		}
		c.tlsConfig.InsecureSkipVerify = os.Getenv("DOCKER_TLS_VERIFY") == ""
		return nil
	}
}

func tlsConfig(caPath, certPath, keyPath string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caPath != "" {
		pem, err := os.ReadFile(caPath)
		if err != nil {
			return nil, fmt.Errorf("could not read CA certificate %q: %w", caPath, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no certificates in %q", caPath)
		}
		cfg.RootCAs = pool
	}
	if certPath != "" || keyPath != "" {
		pair, err := tls.LoadX509KeyPair(certPath, keyPath)
		if err != nil {
			return nil, fmt.Errorf("could not load X509 key pair: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
