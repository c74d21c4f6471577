package gateway

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/client/protocol"
)

func (s *server) scaleStream(c *gin.Context) {
	var body scaleBody
	if !s.decodeBody(c, &body) {
		return
	}
	resp, err := s.coord.Scale(c.Request.Context(), c.Param("prefix"), body.request())
	s.answer(c, http.StatusAccepted, resp, err)
}

// scaleGroup is the reference design's per-group path. Shard keys are
// shared by every group of a stream, so it scales the whole stream (ours)
// and answers the migration as this group sees it.
func (s *server) scaleGroup(c *gin.Context) {
	var body scaleBody
	if !s.decodeBody(c, &body) {
		return
	}
	req := body.request()
	ctx, prefix, group := c.Request.Context(), c.Param("prefix"), c.Param("group")
	if _, err := s.coord.Group(ctx, prefix, group); err != nil {
		s.writeError(c, err)
		return
	}
	resp, err := s.coord.Scale(ctx, prefix, req)
	if err != nil {
		s.writeError(c, err)
		return
	}
	for i, name := range resp.AffectedConsumerGroups {
		if name == group && i < len(resp.Migrations) {
			c.JSON(http.StatusAccepted, resp.Migrations[i])
			return
		}
	}
	// The group was deleted between the two calls; the stream scaled anyway.
	mig := protocol.Migration{}
	if len(resp.Migrations) > 0 {
		mig = resp.Migrations[0]
	}
	c.JSON(http.StatusAccepted, mig)
}

func (s *server) getMigration(c *gin.Context) {
	ctx, prefix, group, id := c.Request.Context(), c.Param("prefix"), c.Param("group"), c.Param("id")
	resp, err := s.coord.Migration(ctx, prefix, group, id)
	if isCode(err, protocol.CodeMigrationNotFound) && id == protocol.NoopReshardingID {
		resp, err = s.noopMigration(c, prefix, group)
	}
	s.answer(c, http.StatusOK, resp, err)
}

func (s *server) rollbackMigration(c *gin.Context) {
	var req protocol.OperatorRequest
	if !s.decodeBody(c, &req) {
		return
	}
	ctx, prefix, group, id := c.Request.Context(), c.Param("prefix"), c.Param("group"), c.Param("id")
	// The noop migration is refused there like any past ACTIVE (422), and
	// its complete answered like any DEPRECATED one (package reshard).
	resp, err := s.coord.Rollback(ctx, prefix, group, id, req)
	s.answer(c, http.StatusAccepted, resp, err)
}

// noopMigration is the migration a scale to the current shard count answers
// (docs/protocol.md §5.5): nothing is recorded for it, so a client that
// follows the reshardingId it was given would otherwise get 404 for a scale
// that succeeded. It is the group's current count, DEPRECATED, timed now
// like the scale's own answer; an unknown stream or group is still 404.
func (s *server) noopMigration(c *gin.Context, prefix, group string) (protocol.Migration, error) {
	g, err := s.coord.Group(c.Request.Context(), prefix, group)
	if err != nil {
		return protocol.Migration{}, err
	}
	now := s.opts.Now().UTC()
	return protocol.Migration{ReshardingID: protocol.NoopReshardingID, FromShardCount: g.ShardCount,
		ToShardCount: g.ShardCount, State: protocol.MigrationDeprecated, CreatedAt: now, UpdatedAt: now}, nil
}

// isCode reports whether err carries the protocol error code code.
func isCode(err error, code protocol.ErrorCode) bool {
	var perr *protocol.Error
	return errors.As(err, &perr) && perr.Code == code
}

func (s *server) completeMigration(c *gin.Context) {
	var req protocol.OperatorRequest
	if !s.decodeBody(c, &req) {
		return
	}
	resp, err := s.coord.Complete(c.Request.Context(), c.Param("prefix"), c.Param("id"), req)
	s.answer(c, http.StatusAccepted, resp, err)
}

func (s *server) migrations(c *gin.Context) {
	resp, err := s.coord.Migrations(c.Request.Context(), c.Param("prefix"), c.Param("group"))
	s.answer(c, http.StatusOK, resp, err)
}
