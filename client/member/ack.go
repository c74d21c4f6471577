package member

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// ackDelSource acknowledges and deletes one entry in one step, the fallback
// of XACKDEL for servers older than 8.2. KEYS[1] is the stream, ARGV[1] the
// group, ARGV[2…] the ids. Like XACKDEL KEEPREF it deletes the entry even if
// another group still references it. A script is atomic, and both commands
// touch KEYS[1] only, so it runs on one cluster slot.
const ackDelSource = `
local acked = redis.call('XACK', KEYS[1], unpack(ARGV))
redis.call('XDEL', KEYS[1], unpack(ARGV, 2))
return acked
`

// acker runs AckDel in the way the server supports, decided once per Run.
type acker struct {
	rdb    redis.UniversalClient
	native bool // XACKDEL exists
	script *redis.Script
}

// newAcker asks the server once whether it knows XACKDEL (COMMAND INFO
// answers a nil entry for an unknown command). A failed probe falls back to
// the script, which every server with Lua runs.
func newAcker(ctx context.Context, rdb redis.UniversalClient) (*acker, error) {
	a := &acker{rdb: rdb, script: redis.NewScript(ackDelSource)}
	res, err := rdb.Do(ctx, "COMMAND", "INFO", "XACKDEL").Slice()
	if err != nil {
		return a, fmt.Errorf("probe XACKDEL with COMMAND INFO: %w", err)
	}
	a.native = len(res) == 1 && res[0] != nil
	return a, nil
}

func (a *acker) ackDel(ctx context.Context, key, group string, ids ...string) error {
	if a.native {
		if err := a.rdb.XAckDel(ctx, key, group, "KEEPREF", ids...).Err(); err != nil {
			return fmt.Errorf("XACKDEL: %w", err)
		}
		return nil
	}
	args := make([]any, 0, len(ids)+1)
	args = append(args, group)
	for _, id := range ids {
		args = append(args, id)
	}
	if err := a.script.Run(ctx, a.rdb, []string{key}, args...).Err(); err != nil {
		return fmt.Errorf("XACK+XDEL script: %w", err)
	}
	return nil
}
