// Package registry holds registry credentials: the AuthConfig type, its X-Registry-Auth
// encoding, and the lookup of stored credentials in the docker CLI's config.json and its
// credential helpers.
package registry

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// AuthConfig is a set of registry credentials, as sent in X-Registry-Auth and to POST /auth.
type AuthConfig struct {
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// Auth is base64("username:password"), the form config.json keeps.
	Auth          string `json:"auth,omitempty"`
	Email         string `json:"email,omitempty"`
	ServerAddress string `json:"serveraddress,omitempty"`
	// IdentityToken is an OAuth refresh token the daemon exchanges for access tokens.
	IdentityToken string `json:"identitytoken,omitempty"`
	// RegistryToken is a bearer token passed to the registry as is.
	RegistryToken string `json:"registrytoken,omitempty"`
}

// AuthenticateOKBody is the reply of a successful login.
type AuthenticateOKBody struct {
	IdentityToken string `json:"IdentityToken"`
	Status        string `json:"Status"`
}

// EncodeAuthConfig encodes credentials for the X-Registry-Auth header: base64url (with padding)
// of the JSON object.
func EncodeAuthConfig(auth AuthConfig) (string, error) {
	buf, err := json.Marshal(auth)
	if err != nil {
		return "", err
	}
	return base64.URLEncoding.EncodeToString(buf), nil
}

// DecodeAuthConfig reverses EncodeAuthConfig; it accepts both base64 alphabets and a missing pad.
func DecodeAuthConfig(header string) (AuthConfig, error) {
	var auth AuthConfig
	if header == "" {
		return auth, nil
	}
	var raw []byte
	var err error
	for _, enc := range []*base64.Encoding{base64.URLEncoding, base64.RawURLEncoding, base64.StdEncoding, base64.RawStdEncoding} {
		if raw, err = enc.DecodeString(header); err == nil {
			break
		}
	}
	if err != nil {
		return auth, fmt.Errorf("invalid X-Registry-Auth header: %w", err)
	}
	if err := json.Unmarshal(raw, &auth); err != nil {
		return auth, fmt.Errorf("invalid X-Registry-Auth header: %w", err)
	}
	return auth, nil
}
