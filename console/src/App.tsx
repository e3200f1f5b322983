/**
 * The console's frame (runs in the browser): signed out, a sign-in card; signed in, the navigation and
 * the page of the current path, with the state every page shares (state.ts). The API key in use lives
 * in this component's state, memory only: it is handed over from a key just created or pasted on a
 * page, stays in use on every page (moving between them loads nothing), is shown masked under the
 * header with a way to forget it, and is gone on reload.
 */
import { Box, Button, Callout, Card, Container, Flex, Heading, Text, Theme } from "@radix-ui/themes";
import { useEffect, useMemo, useState, type ReactNode } from "react";
import type { ConsoleConfig } from "../../contract/console.ts";
import { currentSession, signIn, signOut } from "./auth.ts";
import { KeyInUse, PageLink } from "./components.tsx";
import { BatchesPage } from "./pages/Batches.tsx";
import { ImagesPage } from "./pages/Images.tsx";
import { KeysPage } from "./pages/Keys.tsx";
import { ModelsPage } from "./pages/Models.tsx";
import { TrainingsPage } from "./pages/Trainings.tsx";
import { TryPage } from "./pages/Try.tsx";
import { UsagePage } from "./pages/Usage.tsx";
import { WebhooksPage } from "./pages/Webhooks.tsx";
import { navigate, PAGES, usePath } from "./router.ts";
import { ConsoleContext, type ConsoleState, type KeyInUse as Key } from "./state.ts";


export function App({ config, signInError }: { config: ConsoleConfig; signInError: string | null }) {
  const [session] = useState(currentSession);
  const [key, setKey] = useState<Key | null>(null);
  const path = usePath();
  const pages = useMemo(() => PAGES.filter((p) => !("images" in p) || config.images.browser), [config]);
  const page = pages.find((p) => p.path === path);
  useEffect(() => {
    if (session && !page) navigate(pages[0]!.path);
  }, [session, page, pages]);
  useEffect(() => {
    document.title = page ? `${page.title} · Decision service console` : "Decision service console";
  }, [page]);

  const shared: ConsoleState | null = useMemo(
    () =>
      session && {
        config,
        session,
        apiKey: key?.secret ?? "",
        apiKeyName: key?.name ?? null,
        setApiKey: (secret: string, name: string | null = null) => setKey(secret ? { secret, name } : null),
      },
    [config, session, key],
  );

  const frame = (
    <>
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <Box asChild style={{ borderBottom: "1px solid var(--gray-a5)" }}>
        <header>
          <Container size="3" px="3" py="2">
            <Flex align="center" justify="between" gap="3" wrap="wrap">
              <Text weight="bold" size="4">
                Decision service
              </Text>
              {session && (
                <nav aria-label="Console">
                  <Flex gap="4" wrap="wrap">
                    {pages.map((p) => (
                      <NavLink key={p.path} to={p.path} current={p.path === path}>
                        {p.title}
                      </NavLink>
                    ))}
                  </Flex>
                </nav>
              )}
              {session && (
                <Flex align="center" gap="3" wrap="wrap">
                  <Text size="2">{session.subject}</Text>
                  <Button variant="soft" onClick={() => void signOut(config)}>
                    Sign out
                  </Button>
                </Flex>
              )}
            </Flex>
            {session && <KeyInUse />}
          </Container>
        </header>
      </Box>
      <main id="main">
        <Container size="3" px="3" py="4">
          {signInError && (
            <Callout.Root color="red" role="alert" mb="4" highContrast>
              <Callout.Text>{signInError}</Callout.Text>
            </Callout.Root>
          )}
          {session ? page && <CurrentPage path={page.path} /> : <SignedOut config={config} />}
        </Container>
      </main>
    </>
  );
  return (
    <Theme accentColor="indigo" grayColor="slate" radius="medium">
      {shared ? <ConsoleContext.Provider value={shared}>{frame}</ConsoleContext.Provider> : frame}
    </Theme>
  );
}

function CurrentPage({ path }: { path: string }) {
  if (path === "/console/models") return <ModelsPage />;
  if (path === "/console/try") return <TryPage />;
  if (path === "/console/batches") return <BatchesPage />;
  if (path === "/console/trainings") return <TrainingsPage />;
  if (path === "/console/images") return <ImagesPage />;
  if (path === "/console/usage") return <UsagePage />;
  if (path === "/console/webhooks") return <WebhooksPage />;
  return <KeysPage />;
}

function NavLink({ to, current, children }: { to: string; current: boolean; children: ReactNode }) {
  return (
    <PageLink to={to} className="nav-link" aria-current={current ? "page" : undefined}>
      {children}
    </PageLink>
  );
}

function SignedOut({ config }: { config: ConsoleConfig }) {
  const [error, setError] = useState<string | null>(null);
  return (
    <Card size="3" style={{ maxWidth: 480 }}>
      <Flex direction="column" gap="3">
        <Heading as="h1" size="6">
          Sign in
        </Heading>
        <Text as="p">Sign in with your organization&apos;s account to manage API keys, see your models and try decisions.</Text>
        {error && (
          <Callout.Root color="red" role="alert" highContrast>
            <Callout.Text>{error}</Callout.Text>
          </Callout.Root>
        )}
        <Box>
          <Button
            size="3"
            disabled={!config.client_id}
            onClick={() => {
              const returnTo = location.pathname === "/console/" ? PAGES[0].path : location.pathname;
              signIn(config, returnTo).catch((err: Error) => setError(err.message));
            }}
          >
            Sign in
          </Button>
        </Box>
        {!config.client_id && <Text as="p">This deployment names no console client (OIDC_CONSOLE_CLIENT_ID), so sign-in is not available here.</Text>}
      </Flex>
    </Card>
  );
}
