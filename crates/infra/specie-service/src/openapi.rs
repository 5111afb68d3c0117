//! Every service's API described for machines: an OpenAPI 3.1 document built from the code (the
//! request and answer bodies' types derive `utoipa::ToSchema`; each service lists its routes
//! with the same path constants its router uses) and served at `GET /openapi.json`. The
//! template's own paths (`/metrics`, `/livez`, `/readyz`, `/openapi.json`) and the one error
//! body are added to every document here, once. A schema-driven fuzzer reads the document and
//! checks each answer against it (`crates/specie/tests/specie/api_fuzz.rs`).

use axum::routing::get;
use axum::Router;
use utoipa::openapi::path::{HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
use utoipa::openapi::{
    ComponentsBuilder, Content, InfoBuilder, OpenApi, OpenApiBuilder, Paths, Ref, RefOr, Required, ResponseBuilder,
    Schema,
};
use utoipa::ToSchema;

use crate::observe::{HealthBody, LIVEZ_PATH, METRICS_PATH, READYZ_PATH};

/// Where every service serves its document.
pub const OPENAPI_PATH: &str = "/openapi.json";
const JSON: &str = "application/json";
const BYTES: &str = "application/octet-stream";
const ERROR_SCHEMA: &str = "ErrorBody";

/// A service's API as it is being described.
pub struct ApiDoc {
    title: String,
    description: String,
    paths: Paths,
    schemas: Vec<(String, RefOr<Schema>)>,
    /// What each path parameter is, by name (a string otherwise).
    parameters: Vec<(String, Param)>,
}

/// What a path parameter holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    /// 32 bytes as 64 lowercase hex digits: a txid, a UHS id, a key.
    Hex32,
    /// A whole number: a height, a sequence, an account number.
    Number,
}

impl Param {
    fn schema(self) -> RefOr<Schema> {
        match self {
            Param::Hex32 => ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some("^[0-9a-f]{64}$"))
                .into(),
            Param::Number => ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(0)).into(),
        }
    }
}

/// What a request carries: nothing, JSON of the named schema, or a canonical encoding.
enum Request {
    None,
    Json(String),
    Bytes,
}

/// What a success answers: JSON of the named schema, a canonical encoding, text of a content
/// type, or a JSON object (this document).
enum Answer {
    Json(String),
    Bytes,
    Text(&'static str),
    Object,
}

impl ApiDoc {
    /// A document for the service `title`; `description` says what it is and where its prose
    /// documentation lives.
    pub fn new(title: &str, description: &str) -> ApiDoc {
        let doc = ApiDoc {
            title: title.to_string(),
            description: description.to_string(),
            paths: Paths::new(),
            schemas: Vec::new(),
            parameters: Vec::new(),
        };
        let health = "Runs; `/readyz` answers 503 with the checks that do not hold while it cannot serve";
        doc.get::<HealthBody>(LIVEZ_PATH, "Whether the process runs")
            .get::<HealthBody>(READYZ_PATH, health)
            .operation(
                HttpMethod::Get,
                METRICS_PATH,
                "Prometheus metrics (OpenMetrics text): docs/operator-guide.md, \"Metrics and health\"",
                (Request::None, &[]),
                Answer::Text(specie_metrics::CONTENT_TYPE),
            )
            .operation(
                HttpMethod::Get,
                OPENAPI_PATH,
                "This document",
                (Request::None, &[]),
                Answer::Object,
            )
    }

    /// Path parameters named `name` (`{name}` in the routes added after this) hold `what`.
    pub fn path_parameter(mut self, name: &str, what: Param) -> ApiDoc {
        self.parameters.push((name.to_string(), what));
        self
    }

    /// `GET path` answering `T` as JSON.
    pub fn get<T: ToSchema>(self, path: &str, summary: &str) -> ApiDoc {
        self.get_with_query::<T>(path, summary, &[])
    }

    /// `GET path?name=…` answering `T`, each query parameter an optional whole number
    /// (`(name, what it is)`).
    pub fn get_with_query<T: ToSchema>(mut self, path: &str, summary: &str, query: &[(&str, &str)]) -> ApiDoc {
        let answer = Answer::Json(self.schema_of::<T>());
        self.operation(HttpMethod::Get, path, summary, (Request::None, query), answer)
    }

    /// `POST path` with `R` as JSON, answering `T`.
    pub fn post<R: ToSchema, T: ToSchema>(mut self, path: &str, summary: &str) -> ApiDoc {
        let request = Request::Json(self.schema_of::<R>());
        let answer = Answer::Json(self.schema_of::<T>());
        self.operation(HttpMethod::Post, path, summary, (request, &[]), answer)
    }

    /// `POST path` with no body, answering `T`.
    pub fn post_empty<T: ToSchema>(mut self, path: &str, summary: &str) -> ApiDoc {
        let answer = Answer::Json(self.schema_of::<T>());
        self.operation(HttpMethod::Post, path, summary, (Request::None, &[]), answer)
    }

    /// `POST path` with a canonical encoding as the body, answering `T`.
    pub fn post_bytes<T: ToSchema>(mut self, path: &str, summary: &str) -> ApiDoc {
        let answer = Answer::Json(self.schema_of::<T>());
        self.operation(HttpMethod::Post, path, summary, (Request::Bytes, &[]), answer)
    }

    /// `POST path` with a canonical encoding as the body, answering one.
    pub fn post_bytes_for_bytes(self, path: &str, summary: &str) -> ApiDoc {
        self.operation(HttpMethod::Post, path, summary, (Request::Bytes, &[]), Answer::Bytes)
    }

    /// `T`'s schema name, with every schema it names kept for the components.
    fn schema_of<T: ToSchema>(&mut self) -> String {
        let name = T::name().to_string();
        if !self.schemas.iter().any(|(known, _)| *known == name) {
            self.schemas.push((name.clone(), T::schema()));
            T::schemas(&mut self.schemas);
        }
        name
    }

    fn operation(
        mut self,
        method: HttpMethod,
        path: &str,
        summary: &str,
        (request, query): (Request, &[(&str, &str)]),
        answer: Answer,
    ) -> ApiDoc {
        let success = match answer {
            Answer::Json(name) => content(JSON, Content::new(Some(Ref::from_schema_name(name)))),
            Answer::Bytes => content(BYTES, Content::new(Some(binary()))),
            Answer::Text(content_type) => content(content_type, Content::new(Some(text()))),
            Answer::Object => content(JSON, Content::new(Some(ObjectBuilder::new().schema_type(Type::Object)))),
        };
        let error = content(JSON, Content::new(Some(Ref::from_schema_name(ERROR_SCHEMA))))
            .description("An error: its code is stable, its message says what to do (docs/api.md, \"Errors\")");
        let mut operation = OperationBuilder::new()
            .summary(Some(summary))
            .response("200", success.build())
            .response("default", error.build());
        for name in path_parameters(path) {
            let schema = (self.parameters.iter())
                .find(|(known, _)| known == name)
                .map_or_else(text, |(_, what)| what.schema());
            operation = operation.parameter(
                ParameterBuilder::new()
                    .name(name)
                    .parameter_in(ParameterIn::Path)
                    .required(Required::True)
                    .schema(Some(schema)),
            );
        }
        for (name, what) in query {
            operation = operation.parameter(
                ParameterBuilder::new()
                    .name(*name)
                    .parameter_in(ParameterIn::Query)
                    .required(Required::False)
                    .description(Some(*what))
                    .schema(Some(Param::Number.schema())),
            );
        }
        let body = match request {
            Request::None => None,
            Request::Json(name) => Some((JSON, Content::new(Some(Ref::from_schema_name(name))))),
            Request::Bytes => Some((BYTES, Content::new(Some(binary())))),
        };
        if let Some((content_type, content)) = body {
            let body = RequestBodyBuilder::new()
                .content(content_type, content)
                .required(Some(Required::True));
            operation = operation.request_body(Some(body.build()));
        }
        self.paths.add_path_operation(path, vec![method], operation.build());
        self
    }

    /// The document.
    pub fn openapi(&self) -> OpenApi {
        let mut schemas = self.schemas.clone();
        schemas.push((ERROR_SCHEMA.to_string(), error_schema()));
        schemas.sort_by(|a, b| a.0.cmp(&b.0));
        schemas.dedup_by(|a, b| a.0 == b.0);
        OpenApiBuilder::new()
            .info(
                InfoBuilder::new()
                    .title(self.title.clone())
                    .version(env!("CARGO_PKG_VERSION"))
                    .description(Some(self.description.clone())),
            )
            .paths(self.paths.clone())
            .components(Some(ComponentsBuilder::new().schemas_from_iter(schemas).build()))
            .build()
    }

    /// The route that serves the document (made once), for a router of any state.
    pub fn router<S: Clone + Send + Sync + 'static>(&self) -> Router<S> {
        let json = self.openapi().to_json().expect("an OpenAPI document serializes");
        Router::new().route(
            OPENAPI_PATH,
            get(move || {
                let json = json.clone();
                async move { ([(axum::http::header::CONTENT_TYPE, JSON)], json) }
            }),
        )
    }
}

fn content(content_type: &str, content: Content) -> utoipa::openapi::ResponseBuilder {
    ResponseBuilder::new().description("").content(content_type, content)
}

fn text() -> RefOr<Schema> {
    ObjectBuilder::new().schema_type(Type::String).into()
}

fn binary() -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(SchemaType::new(Type::String))
        .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
            utoipa::openapi::KnownFormat::Binary,
        )))
        .into()
}

/// `{"error": {"code", "message", "leader_http"?, …}}`: the one error body (`crate::error`). A
/// service's own extra fields are allowed beside.
fn error_schema() -> RefOr<Schema> {
    let detail = ObjectBuilder::new()
        .property("code", text())
        .required("code")
        .property("message", text())
        .required("message")
        .property("leader_http", text());
    ObjectBuilder::new().property("error", detail).required("error").into()
}

/// The `{name}` segments of a route template.
fn path_parameters(path: &str) -> impl Iterator<Item = &str> {
    path.split('/')
        .filter_map(|segment| segment.strip_prefix('{').and_then(|rest| rest.strip_suffix('}')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, utoipa::ToSchema)]
    struct Inner {
        value: u64,
    }

    #[derive(serde::Serialize, utoipa::ToSchema)]
    struct Outer {
        inner: Inner,
        names: Vec<String>,
    }

    #[test]
    fn a_document_names_every_route_its_parameters_and_every_schema_it_refers_to() {
        let doc = ApiDoc::new("test", "a test service")
            .get_with_query::<Outer>("/v1/things/{id}", "a thing", &[("height", "at this height")])
            .post_bytes_for_bytes("/v1/things", "make a thing");
        let json: serde_json::Value = serde_json::from_str(&doc.openapi().to_json().unwrap()).unwrap();
        let paths = json["paths"].as_object().unwrap();
        let mut names: Vec<&str> = paths.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "/livez",
                "/metrics",
                "/openapi.json",
                "/readyz",
                "/v1/things",
                "/v1/things/{id}"
            ]
        );
        let get = &paths["/v1/things/{id}"]["get"];
        let parameters: Vec<(&str, &str)> = get["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["name"].as_str().unwrap(), p["in"].as_str().unwrap()))
            .collect();
        assert_eq!(parameters, [("id", "path"), ("height", "query")]);
        // Every reference resolves to a schema of the components.
        let schemas = json["components"]["schemas"].as_object().unwrap();
        let text = json.to_string();
        for reference in text.split("\"#/components/schemas/").skip(1) {
            let name = &reference[..reference.find('"').unwrap()];
            assert!(schemas.contains_key(name), "{name} is referred to but not defined");
        }
        assert!(schemas.contains_key("Inner") && schemas.contains_key("ErrorBody"));
        assert_eq!(
            paths["/v1/things"]["post"]["requestBody"]["content"]
                .as_object()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            ["application/octet-stream"]
        );
    }
}
