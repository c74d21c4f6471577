package gateway

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/client/protocol"
)

func (s *server) health(c *gin.Context) {
	c.JSON(http.StatusOK, s.coord.Health(c.Request.Context()))
}

func (s *server) compatibility(c *gin.Context) {
	c.JSON(http.StatusOK, protocol.CurrentCompatibility())
}

// cluster answers the cluster view of Options.Cluster; 404 outside the
// cluster mode.
func (s *server) cluster(c *gin.Context) {
	if s.opts.Cluster == nil {
		abortWith(c, protocol.CodeNotFound, "not in cluster mode: this server runs alone (--store pebble)")
		return
	}
	resp, err := s.opts.Cluster(c.Request.Context())
	s.answer(c, http.StatusOK, resp, err)
}

func (s *server) listGroups(c *gin.Context) {
	resp, err := s.coord.Groups(c.Request.Context())
	s.answer(c, http.StatusOK, resp, err)
}

func (s *server) members(c *gin.Context) {
	resp, err := s.coord.Members(c.Request.Context(), c.Param("prefix"), c.Param("group"))
	s.answer(c, http.StatusOK, resp, err)
}

func (s *server) assignments(c *gin.Context) {
	resp, err := s.coord.Assignments(c.Request.Context(), c.Param("prefix"), c.Param("group"))
	s.answer(c, http.StatusOK, resp, err)
}

func (s *server) consumption(c *gin.Context) {
	resp, err := s.coord.Consumption(c.Request.Context(), c.Param("prefix"), c.Param("group"))
	s.answer(c, http.StatusOK, resp, err)
}

// shards reads every readable shard live from Redis (ours), with the
// memory the background metrics collection last sampled: 503
// REDIS_NOT_CONFIGURED without --redis.
func (s *server) shards(c *gin.Context) {
	resp, err := s.coord.Shards(c.Request.Context(), c.Param("prefix"), c.Param("group"))
	if err == nil {
		memory := s.metrics.ShardMemoryOf(resp.StreamPrefix)
		for i := range resp.Shards {
			if b, ok := memory[resp.Shards[i].ShardIndex]; ok && resp.Shards[i].Exists {
				resp.Shards[i].MemoryUsageBytes = &b
			}
		}
	}
	s.answer(c, http.StatusOK, resp, err)
}

// offsets shows the group's position on every readable shard, from Redis,
// and the same shards in the reference design's form with its totals.
func (s *server) offsets(c *gin.Context) {
	ctx := c.Request.Context()
	resp, err := s.coord.Offsets(ctx, c.Param("prefix"), c.Param("group"))
	if err != nil {
		s.writeError(c, err)
		return
	}
	g, err := s.coord.Group(ctx, resp.StreamPrefix, resp.ConsumerGroup)
	if err != nil {
		s.writeError(c, err)
		return
	}
	v, err := s.readShardView(ctx, g)
	if err != nil {
		s.writeError(c, err)
		return
	}
	resp.Shards = v.offsets
	offsetTotals(&resp)
	s.answer(c, http.StatusOK, resp, nil)
}

// messages pages through one shard's entries (?cursor=&limit=&direction=).
func (s *server) messages(c *gin.Context) {
	shard, err := strconv.Atoi(c.Param("shard"))
	if err != nil || shard < 0 {
		abortWith(c, protocol.CodeInvalidRequest, "shardIndex must be a non-negative integer")
		return
	}
	limit := 100
	if v := c.Query("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil {
			abortWith(c, protocol.CodeInvalidRequest, "limit must be an integer")
			return
		}
	}
	resp, err := s.coord.Messages(c.Request.Context(), c.Param("prefix"), c.Param("group"), shard,
		c.Query("cursor"), limit, strings.ToUpper(c.Query("direction")))
	if err == nil {
		// The reference design's fields beside ours.
		resp.Shard, resp.Limit = protocol.Shard{ShardIndex: resp.ShardIndex}, limit
		resp.Records = make([]protocol.StreamMessageRecord, len(resp.Messages))
		for i, m := range resp.Messages {
			resp.Records[i] = protocol.NewStreamMessageRecord(resp.StreamPrefix, resp.ConsumerGroup, resp.ShardIndex, resp.StreamKey, m)
		}
	}
	s.answer(c, http.StatusOK, resp, err)
}
