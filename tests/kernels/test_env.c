// kernels/base/env.h: the accepted forms of each kind of setting, and every other value a usage
// error (exit 2) whose one line names the variable, the value and what is accepted.
#include "kernels/base/check.h"
#include "kernels/base/env.h"
#include "tests/test_util.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define VAR "SPKDDP_TEST_SETTING"

static void set(const char *value) {
    if (value)
        setenv(VAR, value, 1);
    else
        unsetenv(VAR);
}

// Runs reader() in a child with VAR=value; its exit status and first stderr line.
static int refused(void (*reader)(void), const char *value, char *line, size_t cap) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], STDERR_FILENO);
        set(value);
        reader();
        _exit(0);
    }
    close(fds[1]);
    ssize_t n = read(fds[0], line, cap - 1);
    line[n > 0 ? n : 0] = 0;
    close(fds[0]);
    char *nl = strchr(line, '\n');
    if (nl) *nl = 0;
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void read_switch(void) { (void)spk_env_switch(VAR); }
static void read_choice(void) { (void)spk_env_choice(VAR, "auto|spin|sleep"); }
static void read_number(void) { (void)spk_env_number(VAR, 4.0, 0.5, 1024.0); }

int main(void) {
    const char *off[] = {NULL, "", "0"};
    for (int i = 0; i < 3; i++) {
        set(off[i]);
        EXPECT(spk_env_switch(VAR) == 0, "'%s' is not off", off[i] ? off[i] : "(unset)");
    }
    set("1");
    EXPECT(spk_env_switch(VAR) == 1, "'1' is not on");
    set(NULL);
    EXPECT(spk_env_choice(VAR, "auto|spin|sleep") == -1, "unset is not -1");
    const char *choices[] = {"auto", "spin", "sleep"};
    for (int i = 0; i < 3; i++) {
        set(choices[i]);
        EXPECT(spk_env_choice(VAR, "auto|spin|sleep") == i, "'%s' is not choice %d", choices[i], i);
    }
    set("");
    EXPECT(spk_env_number(VAR, 4.0, 0.5, 1024.0) == 4.0, "'' is not the fallback");
    set("0.5");
    EXPECT(spk_env_number(VAR, 4.0, 0.5, 1024.0) == 0.5, "the bound itself is refused");
    set("1e3");
    EXPECT(spk_env_number(VAR, 4.0, 0.5, 1024.0) == 1000.0, "1e3 is not 1000");

    const struct {
        void (*read)(void);
        const char *value, *message;
    } bad[] = {
        {read_switch, "yes", "SPKDDP_TEST_SETTING='yes' must be 1 (on) or 0 (off, the default)"},
        {read_switch, "10", "SPKDDP_TEST_SETTING='10' must be 1"},
        {read_choice, "spinning", "SPKDDP_TEST_SETTING='spinning' must be one of auto|spin|sleep"},
        {read_choice, "spi", "must be one of"},
        {read_choice, "auto|spin", "must be one of"},
        {read_number, "4MB", "SPKDDP_TEST_SETTING='4MB' must be a number from 0.5 to 1024"},
        {read_number, "0.25", "from 0.5 to 1024"},
        {read_number, "nan", "from 0.5 to 1024"},
        {read_number, "2000", "from 0.5 to 1024"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char line[512];
        const int code = refused(bad[i].read, bad[i].value, line, sizeof line);
        EXPECT(code == SPK_EXIT_USAGE && strncmp(line, "spkddp: error: ", 15) == 0 && strstr(line, bad[i].message),
               "'%s': exit %d, '%s'", bad[i].value, code, line);
    }
    return test_report("test_env");
}
