// Package container holds the request and response types of the container operations.
// Field names and JSON keys are those of the Engine API (v1.55).
package container

import "time"

// HealthConfig is a container's health check.
type HealthConfig struct {
	Test          []string      `json:",omitempty"`
	Interval      time.Duration `json:",omitempty"`
	Timeout       time.Duration `json:",omitempty"`
	StartPeriod   time.Duration `json:",omitempty"`
	StartInterval time.Duration `json:",omitempty"`
	Retries       int           `json:",omitempty"`
}

// Config is the host-independent configuration of a container (also the image config).
type Config struct {
	Hostname        string              `json:",omitempty"`
	Domainname      string              `json:",omitempty"`
	User            string              `json:",omitempty"`
	AttachStdin     bool                `json:",omitempty"`
	AttachStdout    bool                `json:",omitempty"`
	AttachStderr    bool                `json:",omitempty"`
	ExposedPorts    map[string]struct{} `json:",omitempty"`
	Tty             bool                `json:",omitempty"`
	OpenStdin       bool                `json:",omitempty"`
	StdinOnce       bool                `json:",omitempty"`
	Env             []string            `json:",omitempty"`
	Cmd             []string            `json:",omitempty"`
	Healthcheck     *HealthConfig       `json:",omitempty"`
	ArgsEscaped     bool                `json:",omitempty"`
	Image           string              `json:",omitempty"`
	Volumes         map[string]struct{} `json:",omitempty"`
	WorkingDir      string              `json:",omitempty"`
	Entrypoint      []string            `json:",omitempty"`
	NetworkDisabled bool                `json:",omitempty"`
	OnBuild         []string            `json:",omitempty"`
	Labels          map[string]string   `json:",omitempty"`
	StopSignal      string              `json:",omitempty"`
	StopTimeout     *int                `json:",omitempty"`
	Shell           []string            `json:",omitempty"`
}

// PortBinding is one host address a container port is published on.
type PortBinding struct {
	HostIP   string `json:"HostIp,omitempty"`
	HostPort string `json:",omitempty"`
}

// RestartPolicy says when the daemon restarts a container.
type RestartPolicy struct {
	Name              string `json:",omitempty"`
	MaximumRetryCount int    `json:",omitempty"`
}

// Mount is one entry of HostConfig.Mounts.
type Mount struct {
	Type     string `json:",omitempty"`
	Source   string `json:",omitempty"`
	Target   string `json:",omitempty"`
	ReadOnly bool   `json:",omitempty"`
}

// LogConfig selects a container's log driver.
type LogConfig struct {
	Type   string            `json:",omitempty"`
	Config map[string]string `json:",omitempty"`
}

// HostConfig is the host-dependent configuration of a container.
type HostConfig struct {
	Binds          []string                 `json:",omitempty"`
	NetworkMode    string                   `json:",omitempty"`
	PortBindings   map[string][]PortBinding `json:",omitempty"`
	RestartPolicy  RestartPolicy            `json:",omitempty"`
	AutoRemove     bool                     `json:",omitempty"`
	Mounts         []Mount                  `json:",omitempty"`
	Privileged     bool                     `json:",omitempty"`
	ReadonlyRootfs bool                     `json:",omitempty"`
	CapAdd         []string                 `json:",omitempty"`
	CapDrop        []string                 `json:",omitempty"`
	DNS            []string                 `json:"Dns,omitempty"`
	ExtraHosts     []string                 `json:",omitempty"`
	SecurityOpt    []string                 `json:",omitempty"`
	Tmpfs          map[string]string        `json:",omitempty"`
	ShmSize        int64                    `json:",omitempty"`
	Memory         int64                    `json:",omitempty"`
	NanoCPUs       int64                    `json:"NanoCpus,omitempty"`
	PidsLimit      *int64                   `json:",omitempty"`
	Init           *bool                    `json:",omitempty"`
	LogConfig      LogConfig                `json:",omitempty"`
}
