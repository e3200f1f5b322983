/**
 * Models (runs in the browser): the names and aliases the API key's account may use, with a trained
 * model's evaluation report and a release's calibration report when it has one (GET /v1/models and
 * the report paths it names, with the API key in memory).
 */
import { Box, Button, Card, Code, Flex, Heading, Table, Text } from "@radix-ui/themes";
import { useState } from "react";
import { ModelList, type ModelItem } from "../../../contract/models.ts";
import { call, describe } from "../api.ts";
import { useConsole } from "../state.ts";
import { ApiKeyField, AuthorizedImage, ErrorCallout } from "../components.tsx";

export function ModelsPage() {
  const { apiKey } = useConsole();
  const [models, setModels] = useState<ModelItem[] | null>(null);
  const [report, setReport] = useState<{ title: string; path: string; text: string } | null>(null);
  const [error, setError] = useState<string | null>(null);

  async function load() {
    setError(null);
    try {
      setModels(ModelList.parse((await call("/v1/models", apiKey)).plain).models);
    } catch (err) {
      setError(describe(err));
    }
  }

  async function open(title: string, path: string) {
    setError(null);
    try {
      setReport({ title, path, text: JSON.stringify((await call(path, apiKey)).plain, null, 2) });
    } catch (err) {
      setError(describe(err));
    }
  }

  return (
    <Flex direction="column" gap="4">
      <Heading as="h1" size="6">
        Models
      </Heading>
      <ApiKeyField />
      <Box>
        <Button onClick={() => void load()} disabled={!apiKey}>
          List models
        </Button>
      </Box>
      <ErrorCallout error={error} />
      {models && (
        <Table.Root variant="surface">
          <caption className="visually-hidden">Models</caption>
          <Table.Header>
            <Table.Row>
              <Table.ColumnHeaderCell>Name</Table.ColumnHeaderCell>
              <Table.ColumnHeaderCell>Aliases</Table.ColumnHeaderCell>
              <Table.ColumnHeaderCell>Description</Table.ColumnHeaderCell>
              <Table.ColumnHeaderCell>Reports</Table.ColumnHeaderCell>
            </Table.Row>
          </Table.Header>
          <Table.Body>
            {models.map((model) => (
              <Table.Row key={model.name}>
                <Table.RowHeaderCell>
                  <Code variant="ghost">{model.name}</Code>
                </Table.RowHeaderCell>
                <Table.Cell>{model.aliases.join(", ") || "none"}</Table.Cell>
                <Table.Cell>{model.description}</Table.Cell>
                <Table.Cell>
                  <Flex gap="2" wrap="wrap">
                    {model.calibration && (
                      <Button size="1" variant="soft" onClick={() => void open(`Calibration of ${model.name}`, model.calibration!)}>
                        Calibration
                      </Button>
                    )}
                    {model.evaluation && (
                      <Button size="1" variant="soft" onClick={() => void open(`Evaluation of ${model.name}`, model.evaluation!)}>
                        Evaluation
                      </Button>
                    )}
                  </Flex>
                </Table.Cell>
              </Table.Row>
            ))}
          </Table.Body>
        </Table.Root>
      )}
      {report && (
        <Card>
          <Heading as="h2" size="4" mb="2">
            {report.title}
          </Heading>
          <AuthorizedImage path={`${report.path}.svg`} credential={apiKey} alt={`Reliability diagram: ${report.title}`} />
          <Text as="div" size="1">
            <pre style={{ overflowX: "auto", margin: 0 }}>{report.text}</pre>
          </Text>
        </Card>
      )}
    </Flex>
  );
}
