// `posenc table`: the numbers of any scheme — sinusoidal rows, learned rows, RoPE cos/sin,
// M-RoPE axis maps and position ids, ALiBi slopes and biases, T5 buckets, Transformer-XL's
// relative sinusoid, DeBERTa's relative buckets.
#pragma once

namespace CLI {
class App;
}

namespace posenc::cli {
void add_table_command(CLI::App& app);
}
