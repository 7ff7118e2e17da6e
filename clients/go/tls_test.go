package berth_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	berth "github.com/berth-engine/berth/clients/go"
	"github.com/berth-engine/berth/clients/go/internal/testenv"
)

// tlsEndpoint serves mutual TLS on 127.0.0.1 in front of berthd's socket (berthd itself offers
// TCP only with TLS it does not implement yet) and returns its address and the cert directory.
func tlsEndpoint(t *testing.T, env testenv.Env) (addr, certs string) {
	t.Helper()
	certs = makeCerts(t)
	pair, err := tls.LoadX509KeyPair(filepath.Join(certs, "server-cert.pem"), filepath.Join(certs, "server-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	ca, _ := os.ReadFile(filepath.Join(certs, "ca.pem"))
	pool.AppendCertsFromPEM(ca)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	socket := strings.TrimPrefix(env.DockerHost, "unix://")
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				up, err := net.Dial("unix", socket)
				if err != nil {
					return
				}
				defer up.Close()
				go io.Copy(up, conn)
				io.Copy(conn, up)
			}()
		}
	}()
	return ln.Addr().String(), certs
}

func makeCerts(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("bash", "../testdata/make-certs.sh", dir).CombinedOutput(); err != nil {
		t.Fatalf("make-certs: %v\n%s", err, out)
	}
	return dir
}

func envClient(t *testing.T, vars map[string]string) (*berth.Client, error) {
	t.Helper()
	for _, k := range []string{"DOCKER_HOST", "DOCKER_API_VERSION", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY"} {
		t.Setenv(k, vars[k])
		if vars[k] == "" {
			os.Unsetenv(k)
		}
	}
	c, err := berth.NewClientWithOpts(berth.FromEnv, berth.WithAPIVersionNegotiation())
	if c != nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

func TestTLSMutualWithVerification(t *testing.T) {
	env := testenv.Load(t)
	addr, certs := tlsEndpoint(t, env)
	c, err := envClient(t, map[string]string{"DOCKER_HOST": "tcp://" + addr, "DOCKER_CERT_PATH": certs, "DOCKER_TLS_VERIFY": "1"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.ServerVersion(context.Background())
	if err != nil || v.Os != "linux" {
		t.Fatalf("%+v %v", v, err)
	}
}

func TestTLSVerificationAgainstAnotherCAFails(t *testing.T) {
	env := testenv.Load(t)
	addr, certs := tlsEndpoint(t, env)
	other := makeCerts(t)
	for _, f := range []string{"cert.pem", "key.pem"} {
		data, _ := os.ReadFile(filepath.Join(certs, f))
		os.WriteFile(filepath.Join(other, f), data, 0o600)
	}
	c, err := envClient(t, map[string]string{"DOCKER_HOST": "tcp://" + addr, "DOCKER_CERT_PATH": other, "DOCKER_TLS_VERIFY": "1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ping(context.Background()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("err = %v", err)
	}
	// Without DOCKER_TLS_VERIFY the daemon's certificate is not checked.
	c, err = envClient(t, map[string]string{"DOCKER_HOST": "tcp://" + addr, "DOCKER_CERT_PATH": other})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestTLSClientWithoutCertificateIsRefused(t *testing.T) {
	env := testenv.Load(t)
	addr, certs := tlsEndpoint(t, env)
	c, err := berth.NewClientWithOpts(berth.WithHost("tcp://"+addr), berth.WithTLSClientConfig(filepath.Join(certs, "ca.pem"), "", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Ping(context.Background()); err == nil {
		t.Fatal("ping without a client certificate succeeded")
	}
}
