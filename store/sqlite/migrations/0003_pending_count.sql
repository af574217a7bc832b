-- 0003: each instance's count of pending requests, kept by triggers.
--
-- Reading an instance used to count its pending requests, walking one
-- index entry per pending request: with a backlog of thousands on one
-- instance, every create (which reads its instance) slowed down in
-- proportion. The triggers keep the count in the same transaction as the
-- change, so it is exact whenever it is read.

ALTER TABLE instances ADD COLUMN pending INTEGER NOT NULL DEFAULT 0;

UPDATE instances SET pending = (
    SELECT count(*) FROM requests r WHERE r.instance_id = instances.id AND r.state = 'pending');

CREATE TRIGGER requests_pending_created AFTER INSERT ON requests
WHEN NEW.state = 'pending'
BEGIN
    UPDATE instances SET pending = pending + 1 WHERE id = NEW.instance_id;
END;

-- A request leaves pending once: a terminal state is final, and requests
-- are never deleted nor moved to another instance.
CREATE TRIGGER requests_pending_ended AFTER UPDATE OF state ON requests
WHEN OLD.state = 'pending' AND NEW.state <> 'pending'
BEGIN
    UPDATE instances SET pending = pending - 1 WHERE id = NEW.instance_id;
END;
