package app

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/analytics"
	"github.com/doclog/doclog/projectors/catalog"
)

// clickHouse opens the projectors whose tables live in ClickHouse. They
// are opened in Run, once ClickHouse answers, since opening one connects
// and creates its schema; connect is retried until then.
type clickHouse struct {
	cfg    analytics.Config
	logger *zap.Logger
	specs  []catalog.Spec
	opened map[string]projectors.Projector
	closes []func()
}

func (c *clickHouse) connect(ctx context.Context) error {
	for _, spec := range c.specs {
		if _, ok := c.opened[spec.Name]; ok {
			continue
		}
		p, closeP, err := spec.Open(ctx, catalog.Options{ClickHouse: c.cfg, Logger: c.logger.Named(spec.Name)})
		if err != nil {
			return err
		}
		if c.opened == nil {
			c.opened = map[string]projectors.Projector{}
		}
		c.opened[spec.Name] = p
		c.closes = append(c.closes, closeP)
	}
	return nil
}

// pinger is a projector that can tell whether its database answers.
type pinger interface {
	Ping(ctx context.Context) error
}

func (c *clickHouse) ping(ctx context.Context) error {
	var errs []error
	for _, p := range c.opened {
		if pp, ok := p.(pinger); ok {
			errs = append(errs, pp.Ping(ctx))
		}
	}
	return errors.Join(errs...)
}

func (c *clickHouse) close() {
	for _, closeP := range c.closes {
		closeP()
	}
}
