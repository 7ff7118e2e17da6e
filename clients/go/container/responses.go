package container

// CreateResponse is the reply of ContainerCreate.
type CreateResponse struct {
	ID       string   `json:"Id"`
	Warnings []string `json:"Warnings"`
}

// CommitResponse is the reply of ContainerCommit.
type CommitResponse struct {
	ID string `json:"Id"`
}

// WaitExitError is the error the daemon reports for a wait.
type WaitExitError struct {
	Message string `json:"Message,omitempty"`
}

// WaitResponse is what ContainerWait delivers once the condition is met.
type WaitResponse struct {
	StatusCode int64          `json:"StatusCode"`
	Error      *WaitExitError `json:"Error,omitempty"`
}

// Port is a port a listed container exposes or publishes.
type Port struct {
	IP          string `json:"IP,omitempty"`
	PrivatePort uint16 `json:"PrivatePort"`
	PublicPort  uint16 `json:"PublicPort,omitempty"`
	Type        string `json:"Type"`
}

// Summary is one entry of ContainerList.
type Summary struct {
	ID         string            `json:"Id"`
	Names      []string          `json:"Names"`
	Image      string            `json:"Image"`
	ImageID    string            `json:"ImageID"`
	Command    string            `json:"Command"`
	Created    int64             `json:"Created"`
	Ports      []Port            `json:"Ports"`
	SizeRw     int64             `json:"SizeRw,omitempty"`
	SizeRootFs int64             `json:"SizeRootFs,omitempty"`
	Labels     map[string]string `json:"Labels"`
	State      string            `json:"State"`
	Status     string            `json:"Status"`
}

// State is the run state of an inspected container.
type State struct {
	Status     string `json:"Status"`
	Running    bool   `json:"Running"`
	Paused     bool   `json:"Paused"`
	Restarting bool   `json:"Restarting"`
	OOMKilled  bool   `json:"OOMKilled"`
	Dead       bool   `json:"Dead"`
	Pid        int    `json:"Pid"`
	ExitCode   int    `json:"ExitCode"`
	Error      string `json:"Error"`
	StartedAt  string `json:"StartedAt"`
	FinishedAt string `json:"FinishedAt"`
}

// MountPoint is a mount of an inspected container.
type MountPoint struct {
	Type        string `json:"Type,omitempty"`
	Name        string `json:"Name,omitempty"`
	Source      string `json:"Source"`
	Destination string `json:"Destination"`
	RW          bool   `json:"RW"`
}

// InspectResponse is the reply of ContainerInspect.
type InspectResponse struct {
	ID           string       `json:"Id"`
	Created      string       `json:"Created"`
	Path         string       `json:"Path"`
	Args         []string     `json:"Args"`
	State        *State       `json:"State"`
	Image        string       `json:"Image"`
	Name         string       `json:"Name"`
	RestartCount int          `json:"RestartCount"`
	Driver       string       `json:"Driver"`
	Platform     string       `json:"Platform"`
	LogPath      string       `json:"LogPath"`
	HostConfig   *HostConfig  `json:"HostConfig"`
	Config       *Config      `json:"Config"`
	Mounts       []MountPoint `json:"Mounts"`
}
