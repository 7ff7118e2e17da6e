package registry

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ConfigDir is the directory of the docker CLI's config.json: $DOCKER_CONFIG or ~/.docker.
func ConfigDir() string {
	if d := os.Getenv("DOCKER_CONFIG"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ".docker"
	}
	return filepath.Join(home, ".docker")
}

type authsEntry struct {
	Auth          string `json:"auth,omitempty"`
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	Email         string `json:"email,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty"`
	RegistryToken string `json:"registrytoken,omitempty"`
}

// configFile is the part of config.json credentials live in; other keys are kept as they are.
type configFile struct {
	Auths       map[string]authsEntry `json:"auths,omitempty"`
	CredsStore  string                `json:"credsStore,omitempty"`
	CredHelpers map[string]string     `json:"credHelpers,omitempty"`
	rest        map[string]json.RawMessage
}

func loadConfig(dir string) (*configFile, error) {
	cfg := &configFile{rest: map[string]json.RawMessage{}}
	data, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if errors.Is(err, fs.ErrNotExist) || (err == nil && len(strings.TrimSpace(string(data))) == 0) {
		return cfg, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &cfg.rest); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "config.json"), err)
	}
	if err := json.Unmarshal(data, cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "config.json"), err)
	}
	return cfg, nil
}

func (c *configFile) helperFor(host string) string {
	for key, helper := range c.CredHelpers {
		if hostOfKey(key) == host && helper != "" {
			return helper
		}
	}
	return c.CredsStore
}

func (c *configFile) entryFor(host string) (authsEntry, bool) {
	if e, ok := c.Auths[AuthKey(host)]; ok {
		return e, true
	}
	for key, e := range c.Auths {
		if hostOfKey(key) == host {
			return e, true
		}
	}
	return authsEntry{}, false
}

// ResolveAuthConfig returns the stored credentials for a registry host ("docker.io",
// "127.0.0.1:5000"): from the helper config.json names for it (credHelpers, then credsStore),
// else from the `auths` entry a login wrote. found is false when nothing is stored.
func ResolveAuthConfig(ctx context.Context, configDir, host string) (auth AuthConfig, found bool, err error) {
	cfg, err := loadConfig(configDir)
	if err != nil {
		return AuthConfig{}, false, err
	}
	key := AuthKey(host)
	if helper := cfg.helperFor(host); helper != "" {
		auth, err := helperGet(ctx, helper, key)
		if err == nil {
			return auth, true, nil
		}
		if !errors.Is(err, errCredentialsNotFound) {
			return AuthConfig{}, false, err
		}
	}
	e, ok := cfg.entryFor(host)
	if !ok {
		return AuthConfig{}, false, nil
	}
	auth = AuthConfig{ServerAddress: key, Email: e.Email, IdentityToken: e.IdentityToken, RegistryToken: e.RegistryToken}
	switch {
	case e.Auth != "":
		raw, err := base64.StdEncoding.DecodeString(e.Auth)
		if err != nil {
			return AuthConfig{}, false, fmt.Errorf("invalid auth entry for %s in config.json: %w", key, err)
		}
		user, pass, ok := strings.Cut(string(raw), ":")
		if !ok {
			return AuthConfig{}, false, fmt.Errorf("invalid auth entry for %s in config.json", key)
		}
		auth.Username, auth.Password = user, pass
	case e.Username != "":
		auth.Username, auth.Password = e.Username, e.Password
	}
	found = auth.Username != "" || auth.IdentityToken != "" || auth.RegistryToken != ""
	return auth, found, nil
}

// StoreAuthConfig keeps credentials after a login: through the registry's helper when
// config.json names one (config.json then only records the registry), else in `auths`.
func StoreAuthConfig(ctx context.Context, configDir, host string, auth AuthConfig) error {
	cfg, err := loadConfig(configDir)
	if err != nil {
		return err
	}
	key := AuthKey(host)
	if cfg.Auths == nil {
		cfg.Auths = map[string]authsEntry{}
	}
	if helper := cfg.helperFor(host); helper != "" {
		if err := helperStore(ctx, helper, key, auth); err != nil {
			return err
		}
		cfg.Auths[key] = authsEntry{}
	} else if auth.IdentityToken != "" {
		cfg.Auths[key] = authsEntry{IdentityToken: auth.IdentityToken, Auth: base64.StdEncoding.EncodeToString([]byte(auth.Username + ":"))}
	} else {
		cfg.Auths[key] = authsEntry{Auth: base64.StdEncoding.EncodeToString([]byte(auth.Username + ":" + auth.Password))}
	}
	return cfg.save(configDir)
}

func (c *configFile) save(dir string) error {
	for k, v := range map[string]any{"auths": c.Auths, "credsStore": c.CredsStore, "credHelpers": c.CredHelpers} {
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if string(raw) == `""` || string(raw) == "null" {
			continue
		}
		c.rest[k] = raw
	}
	data, err := json.MarshalIndent(c.rest, "", "\t")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "config.json.*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, "config.json"))
}
