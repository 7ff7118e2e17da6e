package container

// WaitCondition says what ContainerWait waits for.
type WaitCondition string

const (
	// WaitConditionNotRunning returns as soon as the container is not running (the default).
	WaitConditionNotRunning WaitCondition = "not-running"
	// WaitConditionNextExit waits for the next exit, even of a container not started yet.
	WaitConditionNextExit WaitCondition = "next-exit"
	// WaitConditionRemoved waits until the container has been removed.
	WaitConditionRemoved WaitCondition = "removed"
)

// StartOptions are the options of ContainerStart.
type StartOptions struct {
	CheckpointID  string
	CheckpointDir string
}

// StopOptions are the options of ContainerStop.
type StopOptions struct {
	// Signal to send first; the container's StopSignal when empty.
	Signal string
	// Timeout is the number of seconds to wait before killing; nil leaves it to the daemon,
	// -1 waits forever.
	Timeout *int
}

// LogsOptions are the options of ContainerLogs.
type LogsOptions struct {
	ShowStdout bool
	ShowStderr bool
	// Since and Until are Unix timestamps ("1700000000" or "1700000000.5").
	Since      string
	Until      string
	Timestamps bool
	Follow     bool
	// Tail is "all" or a number of lines.
	Tail    string
	Details bool
}

// ListOptions are the options of ContainerList.
type ListOptions struct {
	Size  bool
	All   bool
	Limit int
	// Filters, e.g. {"label": {"app=web"}, "status": {"running"}}.
	Filters map[string][]string
}

// RemoveOptions are the options of ContainerRemove.
type RemoveOptions struct {
	RemoveVolumes bool
	RemoveLinks   bool
	Force         bool
}

// CommitOptions are the options of ContainerCommit.
type CommitOptions struct {
	// Reference is the new image's name, "repo" or "repo:tag".
	Reference string
	Comment   string
	Author    string
	// Changes are Dockerfile instructions applied to the image config, e.g. `CMD ["sh"]`.
	Changes []string
	// Pause is the inverse of the daemon's default: set it to pause the container while committing.
	Pause bool
	// Config, when set, replaces the container's config as the base of the image config.
	Config *Config
}
