package gateway

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/protocol"
)

func (s *server) health(c *gin.Context) {
	c.JSON(http.StatusOK, s.coord.Health())
}

// session answers who the caller is. Authentication is not wired yet, so
// every caller is anonymous.
func (s *server) session(c *gin.Context) {
	c.JSON(http.StatusOK, protocol.Session{Authenticated: false, Username: "", Roles: []string{}})
}

func (s *server) compatibility(c *gin.Context) {
	c.JSON(http.StatusOK, protocol.CurrentCompatibility())
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
