package gateway

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/protocol"
)

// Options configures the HTTP handler.
type Options struct {
	// Logger receives request and error logs. Default slog.Default().
	Logger *slog.Logger
}

type server struct {
	coord *actors.Coordinator
	log   *slog.Logger
}

// New returns the HTTP handler of every endpoint served by coord. Call
// gin.SetMode(gin.ReleaseMode) first outside development: gin's mode is
// its own process-wide setting.
func New(coord *actors.Coordinator, opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &server{coord: coord, log: opts.Logger}
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.NoRoute(notFound)
	r.NoMethod(methodNotAllowed)
	r.Use(gin.CustomRecovery(s.recovery), s.accessLog)

	v1 := r.Group(protocol.BasePath)
	v1.POST("/streams/:prefix", s.createStream)
	v1.POST("/streams/:prefix/scale", s.scaleStream)
	v1.POST("/streams/:prefix/migrations/:id/complete", s.completeMigration)
	v1.POST("/streams/:prefix/groups/:group", s.createGroup)
	v1.GET("/streams/:prefix/groups/:group", s.getGroup)
	v1.DELETE("/streams/:prefix/groups/:group", s.deleteGroup)
	v1.GET("/streams/:prefix/groups/:group/producer-routing", s.producerRouting)
	v1.POST("/streams/:prefix/groups/:group/scale", s.scaleGroup)
	v1.GET("/streams/:prefix/groups/:group/migrations/:id", s.getMigration)
	v1.POST("/streams/:prefix/groups/:group/migrations/:id/rollback", s.rollbackMigration)
	v1.POST("/streams/:prefix/groups/:group/members/:member/heartbeat", s.heartbeat)

	mon := v1.Group("/monitoring")
	mon.GET("/health", s.health)
	mon.GET("/session", s.session)
	mon.GET("/compatibility", s.compatibility)
	mon.GET("/groups", s.listGroups)
	mon.GET("/streams/:prefix/groups/:group", s.getGroup)
	mon.GET("/streams/:prefix/groups/:group/members", s.members)
	mon.GET("/streams/:prefix/groups/:group/assignments", s.assignments)
	mon.GET("/streams/:prefix/groups/:group/consumption", s.consumption)
	mon.GET("/streams/:prefix/groups/:group/migrations", s.migrations)
	return r
}

// accessLog logs every request once it is answered: heartbeats at debug
// level (they are the bulk of traffic), everything else at info.
func (s *server) accessLog(c *gin.Context) {
	start := time.Now()
	c.Next()
	level := slog.LevelInfo
	if c.Request.Method == http.MethodGet || c.FullPath() == protocol.BasePath+"/streams/:prefix/groups/:group/members/:member/heartbeat" {
		level = slog.LevelDebug
	}
	s.log.Log(c.Request.Context(), level, "http request",
		slog.String("method", c.Request.Method), slog.String("route", c.FullPath()),
		slog.String("path", c.Request.URL.Path), slog.Int("status", c.Writer.Status()),
		slog.Duration("duration", time.Since(start)))
}

// answer writes v with status, or err as an error body.
func (s *server) answer(c *gin.Context, status int, v any, err error) {
	if err != nil {
		s.writeError(c, err)
		return
	}
	c.JSON(status, v)
}
