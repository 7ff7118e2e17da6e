// Package network holds the networking part of a container's create request.
package network

// EndpointSettings configures a container's attachment to one network.
type EndpointSettings struct {
	Aliases     []string `json:",omitempty"`
	NetworkID   string   `json:",omitempty"`
	EndpointID  string   `json:",omitempty"`
	Gateway     string   `json:",omitempty"`
	IPAddress   string   `json:",omitempty"`
	IPPrefixLen int      `json:",omitempty"`
	MacAddress  string   `json:",omitempty"`
}

// NetworkingConfig is the networks a container joins when created.
type NetworkingConfig struct {
	EndpointsConfig map[string]*EndpointSettings `json:",omitempty"`
}
