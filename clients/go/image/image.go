// Package image holds the request and response types of the image operations.
package image

import "github.com/berth-engine/berth/clients/go/container"

// PullOptions are the options of ImagePull.
type PullOptions struct {
	// All pulls every tag of the repository (not supported by every daemon).
	All bool
	// RegistryAuth is an encoded X-Registry-Auth value (see registry.EncodeAuthConfig). When
	// empty, the client looks up stored credentials unless told not to.
	RegistryAuth string
	// Platform is "os[/arch[/variant]]".
	Platform string
}

// ListOptions are the options of ImageList.
type ListOptions struct {
	All bool
	// Filters, e.g. {"reference": {"busybox"}}.
	Filters        map[string][]string
	SharedSize     bool
	ContainerCount bool
	Manifests      bool
}

// RemoveOptions are the options of ImageRemove.
type RemoveOptions struct {
	Force         bool
	PruneChildren bool
}

// Summary is one entry of ImageList.
type Summary struct {
	ID          string            `json:"Id"`
	ParentID    string            `json:"ParentId"`
	RepoTags    []string          `json:"RepoTags"`
	RepoDigests []string          `json:"RepoDigests"`
	Created     int64             `json:"Created"`
	Size        int64             `json:"Size"`
	SharedSize  int64             `json:"SharedSize"`
	Labels      map[string]string `json:"Labels"`
	Containers  int64             `json:"Containers"`
}

// RootFS lists an image's layers by diffID.
type RootFS struct {
	Type   string   `json:"Type"`
	Layers []string `json:"Layers,omitempty"`
}

// InspectResponse is the reply of ImageInspect.
type InspectResponse struct {
	ID           string            `json:"Id"`
	RepoTags     []string          `json:"RepoTags"`
	RepoDigests  []string          `json:"RepoDigests"`
	Parent       string            `json:"Parent,omitempty"`
	Comment      string            `json:"Comment,omitempty"`
	Created      string            `json:"Created,omitempty"`
	Author       string            `json:"Author,omitempty"`
	Config       *container.Config `json:"Config,omitempty"`
	Architecture string            `json:"Architecture"`
	Variant      string            `json:"Variant,omitempty"`
	Os           string            `json:"Os"`
	Size         int64             `json:"Size"`
	RootFS       RootFS            `json:"RootFS"`
}

// DeleteResponse is one record of ImageRemove.
type DeleteResponse struct {
	Untagged string `json:"Untagged,omitempty"`
	Deleted  string `json:"Deleted,omitempty"`
}
