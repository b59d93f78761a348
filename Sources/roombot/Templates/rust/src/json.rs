//! A tiny reader for top-level fields of a JSON object: enough for the
//! payloads a plugin gets, with no dependencies.

/// The raw text of the value of top-level `key` in `json`.
pub fn field<'a>(json: &'a str, key: &str) -> Option<&'a str> {
    let bytes = json.as_bytes();
    let mut i = skip_ws(bytes, 0);
    if bytes.get(i) != Some(&b'{') { return None; }
    i += 1;
    loop {
        i = skip_ws(bytes, i);
        if bytes.get(i) != Some(&b'"') { return None; }
        let key_end = skip_value(bytes, i)?;
        let this_key = &json[i + 1..key_end - 1];
        i = skip_ws(bytes, key_end);
        if bytes.get(i) != Some(&b':') { return None; }
        let start = skip_ws(bytes, i + 1);
        let end = skip_value(bytes, start)?;
        if this_key == key { return Some(&json[start..end]); }
        i = skip_ws(bytes, end);
        match bytes.get(i) { Some(b',') => i += 1, _ => return None }
    }
}

/// The string value of top-level `key` (simple escapes decoded).
pub fn string(json: &str, key: &str) -> Option<String> {
    let raw = field(json, key)?;
    if !raw.starts_with('"') { return None; }
    let mut out = String::new();
    let mut chars = raw[1..raw.len() - 1].chars();
    while let Some(c) = chars.next() {
        if c != '\\' { out.push(c); continue; }
        match chars.next()? {
            'n' => out.push('\n'), 't' => out.push('\t'), 'r' => out.push('\r'),
            'u' => { let hex: String = chars.by_ref().take(4).collect(); out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?).unwrap_or('\u{fffd}')); }
            other => out.push(other),
        }
    }
    Some(out)
}

/// The integer value of top-level `key`.
pub fn int(json: &str, key: &str) -> Option<i64> { field(json, key)?.parse().ok() }

/// `text` as a JSON string literal.
pub fn quote(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""), '\\' => out.push_str("\\\\"), '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') { i += 1; }
    i
}

fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => {
            let mut j = i + 1;
            while j < b.len() {
                match b[j] { b'\\' => j += 2, b'"' => return Some(j + 1), _ => j += 1 }
            }
            None
        }
        b'{' | b'[' => {
            let (mut depth, mut j) = (0usize, i);
            while j < b.len() {
                match b[j] {
                    b'"' => { j = skip_value(b, j)?; continue; }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => { depth -= 1; if depth == 0 { return Some(j + 1); } }
                    _ => {}
                }
                j += 1;
            }
            None
        }
        _ => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']' | b' ' | b'\n' | b'\t' | b'\r') { j += 1; }
            if j == i { None } else { Some(j) }
        }
    }
}
