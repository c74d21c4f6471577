package protocol

// Headers of the cluster mode that clients may read (docs/protocol.md §5).
const (
	// OwnerURLHeader names, on the answer to a request about a stream, the
	// advertise URL of the replica that runs the stream and answered it,
	// itself or through a stand-by that forwarded it (§5.6). A client
	// given several replicas' URLs may call that one next and skip the
	// forwarding hop; it is a hint, never a redirect: answers of a replica
	// that does not run the stream (RETRY, 503) carry none.
	OwnerURLHeader = "X-Rscoord-Owner-Url"
	// MissingReplicasHeader names, on a cluster-wide list whose JSON is an
	// array (the Grafana routes), the replicas whose part is missing, as
	// comma-separated ids; absent when the list is whole (§5.4).
	MissingReplicasHeader = "X-Rscoord-Missing-Replicas"
)

// Replica roles in [ClusterReplica] (cluster mode, --store etcd).
const (
	// RoleOwner: the replica holds the owner key of at least one stream
	// and runs that stream's groups.
	RoleOwner = "OWNER"
	// RoleStandby: the replica holds no owner key; requests about a
	// stream are forwarded to the replica that runs it.
	RoleStandby = "STANDBY"
)

// ClusterResponse is GET /coord/v1/monitoring/cluster: the coordinator
// replicas as the answering replica sees them in etcd, and who owns each
// group. The replica asked answers from what etcd holds; the request is
// never forwarded.
type ClusterResponse struct {
	// Store is the store engine: "etcd".
	Store string `json:"store"`
	// Self is the replica that answered.
	Self ClusterReplica `json:"self"`
	// Replicas are the replicas registered in etcd (each under its own
	// etcd lease), sorted by id, and any owner that is not registered.
	Replicas []ClusterReplica `json:"replicas"`
	// Groups lists every group with its owner.
	Groups []ClusterGroup `json:"groups"`
}

// ClusterReplica is one coordinator replica.
type ClusterReplica struct {
	// ID is the replica's id (--replica-id, by default its advertise URL
	// without the scheme).
	ID string `json:"id"`
	// AdvertiseURL is the URL the replica is reached at (--advertise-url).
	AdvertiseURL string `json:"advertiseUrl"`
	// Live: its registration key (bound to its etcd lease) exists.
	Live bool `json:"live"`
	// Role is RoleOwner or RoleStandby.
	Role string `json:"role"`
	// Units are the placement units whose owner key it holds.
	Units []string `json:"units"`
	// GroupsOwned counts the groups it runs.
	GroupsOwned int `json:"groupsOwned"`
}

// ClusterGroup is one group and the replica that runs it.
type ClusterGroup struct {
	// StreamPrefix is the group's stream.
	StreamPrefix string `json:"streamPrefix"`
	// ConsumerGroup is the group.
	ConsumerGroup string `json:"consumerGroup"`
	// Owner is the id of the replica running the group; empty while no
	// replica holds the stream's owner key (between two owners).
	Owner string `json:"owner"`
	// OwnerURL is that replica's advertise URL; empty when Owner is.
	OwnerURL string `json:"ownerUrl"`
}
