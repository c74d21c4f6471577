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

// shards reads every readable shard live from Redis (ours): 503
// REDIS_NOT_CONFIGURED without --redis.
func (s *server) shards(c *gin.Context) {
	resp, err := s.coord.Shards(c.Request.Context(), c.Param("prefix"), c.Param("group"))
	s.answer(c, http.StatusOK, resp, err)
}

// offsets shows the group's position on every readable shard, from Redis.
func (s *server) offsets(c *gin.Context) {
	resp, err := s.coord.Offsets(c.Request.Context(), c.Param("prefix"), c.Param("group"))
	s.answer(c, http.StatusOK, resp, err)
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
	s.answer(c, http.StatusOK, resp, err)
}
