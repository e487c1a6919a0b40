//! docs/config.md against the configuration code: every TOML example in it is a valid
//! configuration, and every option the code knows (all of the defaults' keys, and every key
//! the examples use) is documented there by name.

use sluice_proxy::config::Config;
use std::collections::BTreeSet;

fn config_md() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/config.md");
    std::fs::read_to_string(path).expect("docs/config.md")
}

/// The ```toml blocks of `doc`.
fn toml_blocks(doc: &str) -> Vec<String> {
    doc.split("```toml\n").skip(1).map(|rest| rest.split("```").next().unwrap_or("").to_owned()).collect()
}

/// Every key of `value`, tables walked (array elements included): the dotted path of the
/// table it is in, the key, and whether its value is a table (a section) or an array of them.
fn keys(value: &toml::Value, table: &str, out: &mut BTreeSet<(String, String, bool)>) {
    match value {
        toml::Value::Table(map) => {
            for (key, inner) in map {
                let section = match inner {
                    toml::Value::Table(_) => true,
                    // An empty array may be of tables (`[[route]]` by default) or of values.
                    toml::Value::Array(items) => items.first().is_none_or(toml::Value::is_table),
                    _ => false,
                };
                out.insert((table.to_owned(), key.clone(), section));
                let path = if table.is_empty() { key.clone() } else { format!("{table}.{key}") };
                keys(inner, &path, out);
            }
        }
        toml::Value::Array(items) => items.iter().for_each(|item| keys(item, table, out)),
        _ => {}
    }
}

/// Whether `doc` names the option `key` of `table`: a section as `[path]` or `[[path]]`
/// (or written inline in an example), a value as `` `key` `` or as `key = ...` in an example.
fn documented(doc: &str, table: &str, key: &str, section: bool) -> bool {
    let path = if table.is_empty() { key.to_owned() } else { format!("{table}.{key}") };
    doc.contains(&format!("`{key}`"))
        || doc.contains(&format!("{key} = "))
        || (section && (doc.contains(&format!("[{path}]")) || doc.contains(&format!("[[{path}]]"))))
}

#[test]
fn every_example_in_config_md_is_a_valid_configuration() {
    let doc = config_md();
    let blocks = toml_blocks(&doc);
    assert!(blocks.len() >= 9, "found {} examples", blocks.len());
    for block in &blocks {
        if let Err(e) = Config::parse(block) {
            panic!("docs/config.md example does not parse: {e}\n{block}");
        }
    }
}

#[test]
fn every_option_is_documented_in_config_md() {
    let doc = config_md();
    let mut found = BTreeSet::new();
    keys(&toml::Value::try_from(Config::default()).unwrap(), "", &mut found);
    for block in toml_blocks(&doc) {
        let config = Config::parse(&block).unwrap();
        keys(&toml::Value::try_from(config).unwrap(), "", &mut found);
    }
    // Tables of names the user chooses: a module's settings (its own documentation), the
    // fields of header rules.
    let user_named = |table: &str| {
        table.starts_with("module.settings") || table.ends_with("_headers.set") || table.ends_with("_headers.add")
    };
    let missing: Vec<String> = found
        .iter()
        .filter(|(table, _, _)| !user_named(table))
        .filter(|(table, key, section)| !documented(&doc, table, key, *section))
        .map(|(table, key, _)| if table.is_empty() { key.clone() } else { format!("{table}.{key}") })
        .collect();
    assert!(missing.is_empty(), "options not in docs/config.md: {missing:?}");
}
