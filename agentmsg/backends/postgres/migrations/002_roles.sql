-- agentmsg schema 2: one role per machine or principal; row-level security decides what each may touch.
--
-- * A role is *in* a collaboration when it created it or a member granted it (agentmsg_members);
--   it reads nothing of any other (policies on every table).
-- * An alias is bound to the role that opened or joined as it (agentmsg_aliases, kept by a trigger);
--   a message's sender, an event's alias and an ack's inbox must be bound to the acting role.
-- * History stays append-only (schema 1's triggers); no role is granted UPDATE or DELETE on it.
-- The owner of these tables (whoever ran `agentmsg db migrate`) is not subject to the policies.

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'agentmsg_client') THEN
        CREATE ROLE agentmsg_client NOLOGIN;
    END IF;
END $$;

CREATE TABLE agentmsg_members (
    collab uuid NOT NULL REFERENCES agentmsg_collabs (id),
    role   name NOT NULL,
    by     name NOT NULL DEFAULT session_user,
    PRIMARY KEY (collab, role)
);

CREATE TABLE agentmsg_aliases (
    collab uuid NOT NULL REFERENCES agentmsg_collabs (id),
    alias  text NOT NULL,
    role   name NOT NULL,
    PRIMARY KEY (collab, alias)
);

CREATE FUNCTION agentmsg_is_member(c uuid) RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    SELECT EXISTS (SELECT 1 FROM agentmsg_members WHERE collab = c AND role = session_user)
$$;

CREATE FUNCTION agentmsg_holds(c uuid, a text) RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    SELECT EXISTS (SELECT 1 FROM agentmsg_aliases WHERE collab = c AND alias = a AND role = session_user)
$$;

-- Whoever creates a collaboration is in it.
CREATE FUNCTION agentmsg_add_creator() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    INSERT INTO agentmsg_members (collab, role) VALUES (NEW.id, session_user) ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

CREATE TRIGGER agentmsg_collabs_creator AFTER INSERT ON agentmsg_collabs
    FOR EACH ROW EXECUTE FUNCTION agentmsg_add_creator();

-- An event about an alias bound to another role is refused; opening or joining binds a free alias.
CREATE FUNCTION agentmsg_bind_alias() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    holder name;
BEGIN
    IF NEW.stream <> 'events' OR NEW.sender IS NULL THEN
        RETURN NEW;
    END IF;
    SELECT role INTO holder FROM agentmsg_aliases WHERE collab = NEW.collab AND alias = NEW.sender;
    IF holder IS NOT NULL AND holder <> session_user THEN
        RAISE EXCEPTION 'alias % is bound to another role', NEW.sender USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF holder IS NULL AND NEW.rtype IN ('opened', 'joined') THEN
        INSERT INTO agentmsg_aliases (collab, alias, role) VALUES (NEW.collab, NEW.sender, session_user);
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER agentmsg_records_bind BEFORE INSERT ON agentmsg_records
    FOR EACH ROW EXECUTE FUNCTION agentmsg_bind_alias();

ALTER TABLE agentmsg_collabs ENABLE ROW LEVEL SECURITY;
ALTER TABLE agentmsg_records ENABLE ROW LEVEL SECURITY;
ALTER TABLE agentmsg_members ENABLE ROW LEVEL SECURITY;
ALTER TABLE agentmsg_aliases ENABLE ROW LEVEL SECURITY;

CREATE POLICY collabs_read ON agentmsg_collabs FOR SELECT USING (agentmsg_is_member(id));
CREATE POLICY collabs_create ON agentmsg_collabs FOR INSERT WITH CHECK (true);
CREATE POLICY collabs_order ON agentmsg_collabs FOR UPDATE USING (agentmsg_is_member(id));

CREATE POLICY records_read ON agentmsg_records FOR SELECT USING (agentmsg_is_member(collab));
CREATE POLICY records_append ON agentmsg_records FOR INSERT WITH CHECK (
    agentmsg_is_member(collab)
    AND author = session_user
    AND (stream NOT LIKE 'inbox/%' OR agentmsg_holds(collab, sender))
    AND (stream NOT LIKE 'receipts/%' OR rtype IS DISTINCT FROM 'ack'
         OR agentmsg_holds(collab, substr(stream, length('receipts/') + 1)))
);

CREATE POLICY members_read ON agentmsg_members FOR SELECT USING (agentmsg_is_member(collab));
CREATE POLICY members_grant ON agentmsg_members FOR INSERT WITH CHECK (agentmsg_is_member(collab));
CREATE POLICY aliases_read ON agentmsg_aliases FOR SELECT USING (agentmsg_is_member(collab));

REVOKE ALL ON agentmsg_collabs, agentmsg_records, agentmsg_members, agentmsg_aliases, agentmsg_migrations
    FROM PUBLIC;
GRANT SELECT ON agentmsg_migrations TO agentmsg_client;
GRANT SELECT, INSERT ON agentmsg_collabs, agentmsg_records, agentmsg_members TO agentmsg_client;
GRANT UPDATE (cseq) ON agentmsg_collabs TO agentmsg_client;
GRANT SELECT ON agentmsg_aliases TO agentmsg_client;
