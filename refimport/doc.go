// Package refimport reads the coordination state the reference design
// (ghkdqhrbals/redis-stream-coordinator) keeps in Redis with its Redis
// store, and plans the streams and groups that make the same layout on
// rscoord.
//
// Reading ([Read]) follows the reference store's layout under its key
// prefix (default "redis-stream:coord"): a set "<prefix>:groups" indexes
// the groups, each a hash "<prefix>:{<stream>:<group>}:metadata" whose
// field "aggregate" holds the group as JSON, or, written by older
// versions, a string "<prefix>:{<stream>:<group>}:group" holding the same
// JSON. Planning ([NewPlan]) is pure: groups in, creations and refusals
// out, tested table-driven.
package refimport
