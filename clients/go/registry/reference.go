package registry

import "strings"

// DockerHub is the host name images without a registry part come from.
const DockerHub = "docker.io"

// DockerHubAuthKey is the key Docker Hub credentials are stored under.
const DockerHubAuthKey = "https://index.docker.io/v1/"

// SplitReference splits "host/name:tag" or "name@sha256:..." into the repository and the tag or
// digest ("" when the reference has neither).
func SplitReference(ref string) (repository, tagOrDigest string) {
	if at := strings.IndexByte(ref, '@'); at != -1 {
		return ref[:at], ref[at+1:]
	}
	if colon := strings.LastIndexByte(ref, ':'); colon > strings.LastIndexByte(ref, '/') {
		return ref[:colon], ref[colon+1:]
	}
	return ref, ""
}

// HostOf is the registry host of a repository: its first component when that names a host
// (contains "." or ":", or is "localhost"), else Docker Hub.
func HostOf(repository string) string {
	slash := strings.IndexByte(repository, '/')
	if slash == -1 {
		return DockerHub
	}
	first := repository[:slash]
	if strings.ContainsAny(first, ".:") || first == "localhost" {
		return normalizeHost(first)
	}
	return DockerHub
}

// AuthKey is where credentials for a host are stored: Docker Hub keeps its historical URL.
func AuthKey(host string) string {
	if host == DockerHub {
		return DockerHubAuthKey
	}
	return host
}

// hostOfKey reduces a config.json key ("https://host:5000/v1/", "host:5000") to a host.
func hostOfKey(key string) string {
	if i := strings.Index(key, "://"); i != -1 {
		key = key[i+3:]
	}
	if i := strings.IndexByte(key, '/'); i != -1 {
		key = key[:i]
	}
	return normalizeHost(key)
}

func normalizeHost(host string) string {
	switch host {
	case "index.docker.io", "registry-1.docker.io":
		return DockerHub
	}
	return host
}

// HostOfServerAddress reduces a login server address ("https://index.docker.io/v1/",
// "127.0.0.1:5000") to a registry host; empty means Docker Hub.
func HostOfServerAddress(addr string) string {
	if addr == "" {
		return DockerHub
	}
	return hostOfKey(addr)
}
