package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// tokenUsername marks a helper's Secret as an identity token.
const tokenUsername = "<token>"

type helperCredentials struct {
	ServerURL string `json:"ServerURL"`
	Username  string `json:"Username"`
	Secret    string `json:"Secret"`
}

// errCredentialsNotFound is a helper's "nothing stored" answer.
var errCredentialsNotFound = errors.New("credentials not found in native keychain")

// helperGet asks docker-credential-<helper> for the credentials of serverURL.
func helperGet(ctx context.Context, helper, serverURL string) (AuthConfig, error) {
	out, err := runHelper(ctx, helper, "get", serverURL)
	if err != nil {
		return AuthConfig{}, err
	}
	var c helperCredentials
	if err := json.Unmarshal(out, &c); err != nil {
		return AuthConfig{}, fmt.Errorf("docker-credential-%s get: invalid reply: %w", helper, err)
	}
	if c.Username == tokenUsername {
		return AuthConfig{IdentityToken: c.Secret, ServerAddress: serverURL}, nil
	}
	return AuthConfig{Username: c.Username, Password: c.Secret, ServerAddress: serverURL}, nil
}

// helperStore hands credentials to docker-credential-<helper>.
func helperStore(ctx context.Context, helper, serverURL string, auth AuthConfig) error {
	c := helperCredentials{ServerURL: serverURL, Username: auth.Username, Secret: auth.Password}
	if auth.IdentityToken != "" {
		c.Username, c.Secret = tokenUsername, auth.IdentityToken
	}
	in, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, err = runHelper(ctx, helper, "store", string(in))
	return err
}

func runHelper(ctx context.Context, helper, action, input string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "docker-credential-"+helper, action)
	cmd.Stdin = strings.NewReader(input)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stdout.String() + stderr.String())
		if strings.Contains(strings.ToLower(msg), "credentials not found") {
			return nil, errCredentialsNotFound
		}
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("docker-credential-%s %s: %s", helper, action, msg)
	}
	return stdout.Bytes(), nil
}
